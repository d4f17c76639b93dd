import type { LeasedDelivery } from '../storage/storage.js'
import { signWebhook } from './signer.js'

const USER_AGENT = 'plant-store-webhooks/1'

/** What became of one send. */
export interface SendOutcome {
  /** The subscriber's HTTP status, if it answered. */
  status: number | null
  /** Why the send did not count as delivered (a non-2xx status, a timeout, a network error). */
  error: string | null
  /** Aborted through `controller` by its owner (the worker stopping), not by the timeout. */
  interrupted: boolean
  /** The start of the subscriber's answer, when `answerBytes` asked for it. */
  answer: string
}

/**
 * One signed POST of a delivery's payload, bounded by `timeoutMs`. Never throws: a failure is an
 * outcome. `controller` lets the caller cut the send short; the timeout aborts it too. The worker
 * drops the answer's body; `webhooks test` keeps its first `answerBytes` to show the operator.
 */
export async function sendWebhook(
  delivery: Pick<LeasedDelivery, 'id' | 'url' | 'secret' | 'payload'>,
  timeoutMs: number,
  controller: AbortController,
  answerBytes = 0,
): Promise<SendOutcome> {
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    controller.abort(new Error(`timeout after ${timeoutMs} ms`))
  }, timeoutMs)
  let status: number | null = null
  let error: string | null = null
  let interrupted = false
  let answer = ''
  try {
    const response = await fetch(delivery.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': USER_AGENT,
        ...signWebhook(delivery.secret, delivery.id, delivery.payload),
      },
      body: delivery.payload,
      signal: controller.signal,
      // A redirect is not an acknowledgement, and following it could leak the signed body elsewhere.
      redirect: 'manual',
    })
    status = response.status
    if (answerBytes > 0 && response.body) answer = await readStart(response.body, answerBytes)
    // The rest of the answer is not used; drop it (still under the timeout) so the socket is released.
    await response.body?.cancel().catch(() => {})
    if (status < 200 || status > 299) error = `HTTP ${status}`
  } catch (caught) {
    if (timedOut) error = `timeout after ${timeoutMs} ms`
    else if (controller.signal.aborted) interrupted = true
    else error = describeError(caught)
  } finally {
    clearTimeout(timer)
  }
  return { status, error, interrupted, answer }
}

/** The first `limit` bytes of a body, as text. */
async function readStart(body: ReadableStream<Uint8Array>, limit: number): Promise<string> {
  const reader = body.getReader()
  const chunks: Uint8Array[] = []
  let length = 0
  while (length < limit) {
    const { done, value } = await reader.read()
    if (done) break
    chunks.push(value)
    length += value.length
  }
  reader.releaseLock()
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8')
}

/** A short reason for a failed send: the system error (`connect ECONNREFUSED 127.0.0.1:9`) when there is one. */
function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  const cause = (error as { cause?: unknown }).cause
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code
    if (cause.message) return cause.message
    if (typeof code === 'string') return code
  }
  return error.message || error.name
}
