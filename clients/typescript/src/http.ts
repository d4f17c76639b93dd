import { PlantStoreError } from './errors.js'
import { parseLossless } from './json.js'
import type { CallOptions, ErrorCode, ErrorDetail } from './types.js'

/** What a call needs from the client's settings. */
export interface Transport {
  baseUrl: string
  token: string
  fetch: typeof fetch
  timeoutMs: number
  maxAttempts: number
  maxRetryDelayMs: number
  retryDelayMs: number
}

export interface Call {
  method: 'GET' | 'POST' | 'DELETE'
  /** A path (`/plants/1`) or an absolute URL from a Link header. */
  url: string
  body?: string
  /** Answered 503 or 429, the call is sent again: only for operations that are safe to repeat. */
  idempotent: boolean
}

/** A 503 or a 429 may be retried: the service did nothing and says when to come back. */
const RETRIED = new Set([429, 503])

/**
 * Sends one call, retrying 503 and 429 up to `maxAttempts` times in all, each after Retry-After
 * (seconds or an HTTP date; capped by maxRetryDelayMs) or an exponential delay. Any answer that
 * is not 2xx is thrown as a PlantStoreError; so are a timeout, an abort and a network failure.
 */
export async function send(transport: Transport, call: Call, options: CallOptions = {}): Promise<Response> {
  const timeoutMs = options.timeoutMs ?? transport.timeoutMs
  const timeout = AbortSignal.timeout(timeoutMs)
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout
  const url = new URL(call.url, transport.baseUrl).toString()
  const headers: Record<string, string> = {
    authorization: `Bearer ${transport.token}`,
    accept: 'application/json',
  }
  if (call.body !== undefined) headers['content-type'] = 'application/json'
  for (let attempt = 1; ; attempt++) {
    let response: Response
    try {
      response = await transport.fetch(url, { method: call.method, headers, body: call.body, signal })
    } catch (error) {
      throw failure(error, signal, timeout, timeoutMs)
    }
    if (response.ok) return response
    const retry = call.idempotent && RETRIED.has(response.status) && attempt < transport.maxAttempts
    const problem = await errorFrom(response)
    if (!retry) throw problem
    try {
      await wait(retryDelay(response, attempt, transport), signal)
    } catch (error) {
      throw failure(error, signal, timeout, timeoutMs)
    }
  }
}

function failure(
  error: unknown,
  signal: AbortSignal,
  timeout: AbortSignal,
  timeoutMs: number,
): PlantStoreError {
  if (timeout.aborted)
    return new PlantStoreError(0, 'TIMEOUT', `no answer within ${timeoutMs} ms`, { cause: error })
  if (signal.aborted) {
    // AbortSignal.timeout() aborts with a DOMException named TimeoutError: a timeout, not a cancel.
    if ((signal.reason as { name?: unknown } | undefined)?.name === 'TimeoutError')
      return new PlantStoreError(0, 'TIMEOUT', "no answer before the call's signal timed out", {
        cause: signal.reason,
      })
    return new PlantStoreError(0, 'ABORTED', 'the call was aborted', { cause: signal.reason })
  }
  let message = `the request failed: ${(error as Error).message}`
  // A browser reports a CORS refusal as a bare TypeError ("Failed to fetch"), the same as a dead host.
  if (error instanceof TypeError && inBrowser()) {
    const origin = (globalThis as { location?: { origin?: string } }).location?.origin
    message += ` (a browser reports a CORS refusal this way too: check that the service's CORS_ORIGINS lists this page's origin${origin ? `, ${origin}` : ''})`
  }
  return new PlantStoreError(0, 'NETWORK_ERROR', message, { cause: error })
}

/** A page or a worker in a browser, where fetch applies CORS; not Node.js. */
function inBrowser(): boolean {
  return typeof document !== 'undefined' || 'WorkerGlobalScope' in globalThis
}

/** Milliseconds to wait before the next attempt. */
function retryDelay(response: Response, attempt: number, transport: Transport): number {
  const header = response.headers.get('retry-after')?.trim()
  let ms: number | undefined
  if (header && /^\d+$/.test(header)) ms = Number(header) * 1000
  else if (header && !Number.isNaN(Date.parse(header))) ms = Math.max(0, Date.parse(header) - Date.now())
  ms ??= transport.retryDelayMs * 2 ** (attempt - 1)
  return Math.min(ms, transport.maxRetryDelayMs)
}

function wait(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** The answer's Error body as a PlantStoreError; a body in another shape still gives its status. */
async function errorFrom(response: Response): Promise<PlantStoreError> {
  const requestId = response.headers.get('x-request-id') ?? undefined
  const text = await response.text().catch(() => '')
  let body: Record<string, unknown> | undefined
  try {
    const parsed = parseLossless(text)
    if (typeof parsed === 'object' && parsed !== null) body = parsed as Record<string, unknown>
  } catch {
    body = undefined
  }
  const message = typeof body?.message === 'string' ? body.message : `HTTP ${response.status}`
  const code = typeof body?.code === 'string' ? (body.code as ErrorCode) : undefined
  const details = Array.isArray(body?.details)
    ? (body.details as ErrorDetail[]).filter(
        (d) => typeof d?.field === 'string' && typeof d?.rule === 'string',
      )
    : []
  return new PlantStoreError(response.status, code, message, { details, requestId })
}

/** The target of `Link: <...>; rel="next"`, resolved against the request URL, if any. */
export function nextLink(response: Response): string | undefined {
  const header = response.headers.get('link')
  if (!header) return undefined
  for (const part of header.split(/,(?=\s*<)/)) {
    const match = /^\s*<([^>]*)>(.*)$/.exec(part)
    if (match?.[1] !== undefined && /;\s*rel="?(?:[^";]*\s)?next(?:\s[^";]*)?"?/i.test(match[2] ?? ''))
      return new URL(match[1], response.url).toString()
  }
  return undefined
}
