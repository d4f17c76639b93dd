import { randomBytes } from 'node:crypto'
import { Webhook } from 'standardwebhooks'

/** Standard Webhooks secrets are `whsec_` + base64 of 24 to 64 random bytes; we use 32 (256 bits). */
export const SECRET_PREFIX = 'whsec_'
const SECRET_BYTES = 32

export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64')
}

/** True for a secret this service could have generated (the prefix and a non-empty base64 key). */
export function isWebhookSecret(secret: string): boolean {
  if (!secret.startsWith(SECRET_PREFIX)) return false
  const key = secret.slice(SECRET_PREFIX.length)
  return /^[A-Za-z0-9+/]+={0,2}$/.test(key) && Buffer.from(key, 'base64').length >= 24
}

export interface SignedHeaders {
  'webhook-id': string
  'webhook-timestamp': string
  'webhook-signature': string
}

/**
 * The three Standard Webhooks headers for one attempt. `webhook-id` is the delivery id (stable
 * across retries, so receivers can drop duplicates); the timestamp is this attempt's, so every
 * attempt is signed afresh and a retry hours later is not rejected as stale.
 * Signature: `v1,` + base64 HMAC-SHA256 over `{id}.{unix seconds}.{body}`, keyed with the
 * base64-decoded part of the secret after `whsec_`.
 */
export function signWebhook(
  secret: string,
  msgId: string,
  payload: string,
  now: Date = new Date(),
): SignedHeaders {
  const seconds = Math.floor(now.getTime() / 1000)
  return {
    'webhook-id': msgId,
    'webhook-timestamp': String(seconds),
    'webhook-signature': new Webhook(secret).sign(msgId, now, payload),
  }
}
