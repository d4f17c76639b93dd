/**
 * The tests' HTTP client: `request` (JSON in, text and JSON out) and `rawRequest` (any header, raw
 * bytes). Both use node:http: fetch costs the test process some five times the CPU per request,
 * and a few files send tens of thousands. Every response is recorded for the OpenAPI coverage step.
 */
import { appendFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import path from 'node:path'

export interface ApiResponse {
  status: number
  headers: Headers
  text: string
  json: any
}

// Set by scripts/run-tests.mjs for the whole suite; a file run on its own records nothing.
const observedDir = process.env.PLANT_STORE_OBSERVED_DIR

/** Maps a concrete path to its route template, as the OpenAPI document names it. */
export function routeOf(pathname: string): string {
  if (/^\/plants\/[^/]+$/.test(pathname)) return '/plants/{id}'
  return pathname
}

/** Response headers a client acts on, which the document must declare wherever they are sent. */
const DECLARED_HEADERS = [
  'www-authenticate',
  'retry-after',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  'link',
  'x-request-id',
]

/**
 * Every response a test sees is recorded (method, route, status, and which DECLARED_HEADERS it
 * carried) so scripts/openapi-coverage.mjs can check that the served document declares it: one
 * file per test process in the runner's folder.
 */
function observe(method: string, url: string, status: number, has: (header: string) => boolean): void {
  if (!observedDir) return
  const route = routeOf(new URL(url).pathname)
  const headers = DECLARED_HEADERS.filter(has)
  appendFileSync(
    path.join(observedDir, `${process.pid}.jsonl`),
    `${JSON.stringify({ method, route, status, headers })}\n`,
  )
}

export interface RequestOptions {
  token?: string
  /** A raw Authorization header, overriding `token`. */
  authorization?: string
  /** A string is sent as is; anything else as JSON. */
  body?: unknown
  contentType?: string | null
  headers?: Record<string, string>
  /** Fail (reject) instead of waiting longer than this for the answer. */
  timeoutMs?: number
}

export function request(
  method: string,
  url: string,
  { token, authorization, body, contentType, headers = {}, timeoutMs }: RequestOptions = {},
): Promise<ApiResponse> {
  const sent: Record<string, string> = { ...headers }
  if (authorization !== undefined) sent.authorization = authorization
  else if (token) sent.authorization = `Bearer ${token}`
  let payload: Buffer | undefined
  if (body !== undefined) {
    payload = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body))
    if (contentType !== null) sent['content-type'] = contentType ?? 'application/json'
    sent['content-length'] = String(payload.length)
  } else if (contentType) sent['content-type'] = contentType
  const signal = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs)
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers: sent, signal }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('error', reject)
      res.on('close', () => {
        if (!res.complete) reject(new Error(`${method} ${url}: the connection closed mid-response`))
      })
      res.on('end', () => {
        const status = res.statusCode ?? 0
        const received = new Headers()
        for (let i = 0; i < res.rawHeaders.length; i += 2)
          received.append(res.rawHeaders[i] as string, res.rawHeaders[i + 1] as string)
        const text = Buffer.concat(chunks).toString('utf8')
        observe(method, url, status, (header) => received.has(header))
        let json: unknown
        try {
          json = text ? JSON.parse(text) : undefined
        } catch {
          json = undefined
        }
        resolve({ status, headers: received, text, json })
      })
    })
    req.on('error', reject)
    req.end(payload)
  })
}

/**
 * A request with the headers as given (any framing: Content-Length is added to a body only when
 * neither it nor Transfer-Encoding is given), and a body of raw bytes.
 */
export function rawRequest(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: string | Buffer,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  // node:http sends a DELETE's body with neither Content-Length nor chunked framing; frame it.
  const framed =
    body === undefined || 'content-length' in headers || 'transfer-encoding' in headers
      ? headers
      : { ...headers, 'content-length': String(Buffer.byteLength(body)) }
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers: framed }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => {
        text += chunk
      })
      res.on('end', () => {
        observe(method, url, res.statusCode ?? 0, (header) => header in res.headers)
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text })
      })
    })
    req.on('error', reject)
    req.end(body)
  })
}
