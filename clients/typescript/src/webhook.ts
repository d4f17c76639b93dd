import { Webhook } from 'standardwebhooks'
import { parseLossless, toStoredPlant } from './json.js'
import type { NewPlant } from './types.js'

export { WebhookVerificationError } from 'standardwebhooks'

/**
 * Verifies a newPlant delivery per Standard Webhooks (signature over id, timestamp and the raw
 * body, timestamp within 5 minutes) and returns the plant, its id exact. Pass the body exactly as
 * received, before any JSON parsing. Throws WebhookVerificationError when it does not verify.
 */
export function verifyWebhook(
  rawBody: string | Uint8Array,
  headers: Headers | Record<string, string | string[] | undefined>,
  secret: string,
): NewPlant {
  const body =
    typeof rawBody === 'string' ? rawBody : new TextDecoder('utf-8', { fatal: true }).decode(rawBody)
  // The library's own JSON.parse would round the id: it only checks the signature here.
  new Webhook(secret).verify(body, plainHeaders(headers), { jsonParse: false })
  return toStoredPlant(parseLossless(body), 'webhook body')
}

function plainHeaders(
  headers: Headers | Record<string, string | string[] | undefined>,
): Record<string, string> {
  const plain: Record<string, string> = {}
  if (typeof Headers !== 'undefined' && headers instanceof Headers) {
    headers.forEach((value, name) => (plain[name] = value))
    return plain
  }
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) plain[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : value
  }
  return plain
}
