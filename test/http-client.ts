/**
 * The tests' HTTP client: `request` (fetch) and `rawRequest` (node:http, for what fetch will not
 * send). Every response either sees is recorded for the OpenAPI coverage step.
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

export async function request(
  method: string,
  url: string,
  { token, authorization, body, contentType, headers = {}, timeoutMs }: RequestOptions = {},
): Promise<ApiResponse> {
  const sent: Record<string, string> = { ...headers }
  if (authorization !== undefined) sent.authorization = authorization
  else if (token) sent.authorization = `Bearer ${token}`
  let payload: string | undefined
  if (body !== undefined) {
    payload = typeof body === 'string' ? body : JSON.stringify(body)
    if (contentType !== null) sent['content-type'] = contentType ?? 'application/json'
  } else if (contentType) sent['content-type'] = contentType
  const signal = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs)
  const response = await fetch(url, { method, headers: sent, body: payload, signal })
  const text = await response.text()
  observe(method, url, response.status, (header) => response.headers.has(header))
  let json: unknown
  try {
    json = text ? JSON.parse(text) : undefined
  } catch {
    json = undefined
  }
  return { status: response.status, headers: response.headers, text, json }
}

/** A request through node:http, for what fetch will not send (no Content-Type with a body, raw bytes). */
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
