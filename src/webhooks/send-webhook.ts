import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { LeasedDelivery } from '../storage/storage.js'
import { publicOnlyLookup, refusedLiteral } from './destination-policy.js'
import { signWebhook } from './signer.js'

const USER_AGENT = 'plant-store-webhooks/1'

/** Most bytes of a subscriber's answer body read; the rest is dropped with the connection. */
export const MAX_ANSWER_BYTES = 64 * 1024

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

export interface SendOptions {
  timeoutMs: number
  /** WEBHOOK_ALLOW_PRIVATE: connect to loopback, private and other non-public addresses too. */
  allowPrivate: boolean
}

/**
 * One signed POST of a delivery's payload, bounded by `timeoutMs`. Never throws: a failure is an
 * outcome. `controller` lets the caller cut the send short; the timeout aborts it too. Unless
 * `allowPrivate`, a destination that is (or resolves to) a non-public address fails unconnected.
 * The worker drops the answer's body; `webhooks test` keeps its first `answerBytes` to show the operator.
 */
export async function sendWebhook(
  delivery: Pick<LeasedDelivery, 'id' | 'url' | 'secret' | 'payload'>,
  options: SendOptions,
  controller: AbortController,
  answerBytes = 0,
): Promise<SendOutcome> {
  const { timeoutMs } = options
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
    const url = new URL(delivery.url)
    const refusal = options.allowPrivate ? undefined : refusedLiteral(url)
    if (refusal) throw refusal
    ;({ status, answer } = await post(url, delivery, options.allowPrivate, controller.signal, answerBytes))
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

/**
 * Resolves with the status (and the first `answerBytes` of the body) once the answer's body is read (at most MAX_ANSWER_BYTES of it) or cut
 * off; rejects only when no answer came. Redirects are not followed: a redirect is no
 * acknowledgement, and following it could leak the signed body elsewhere.
 */
function post(
  url: URL,
  delivery: Pick<LeasedDelivery, 'id' | 'secret' | 'payload'>,
  allowPrivate: boolean,
  signal: AbortSignal,
  answerBytes: number,
): Promise<{ status: number; answer: string }> {
  const body = Buffer.from(delivery.payload)
  const options: RequestOptions = {
    method: 'POST',
    signal,
    headers: {
      'content-type': 'application/json',
      'content-length': body.length,
      'user-agent': USER_AGENT,
      ...signWebhook(delivery.secret, delivery.id, delivery.payload),
    },
    ...(allowPrivate ? {} : { lookup: publicOnlyLookup }),
  }
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest
  return new Promise((resolve, reject) => {
    let answered = false
    const request = send(url, options, (response: IncomingMessage) => {
      answered = true
      let read = 0
      const kept: Buffer[] = []
      response.on('data', (chunk: Buffer) => {
        if (read < answerBytes) kept.push(chunk)
        read += chunk.length
        if (read > MAX_ANSWER_BYTES) response.destroy()
      })
      // The status is what counts; a body cut off (by the cap or the timeout) does not change it.
      response.on('error', () => {})
      response.on('close', () =>
        resolve({
          status: response.statusCode ?? 0,
          answer: Buffer.concat(kept).subarray(0, answerBytes).toString('utf8'),
        }),
      )
    })
    request.on('error', (error) => {
      if (!answered) reject(error)
    })
    request.end(body)
  })
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
