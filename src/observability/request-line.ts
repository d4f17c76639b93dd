import { randomUUID } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { TOKEN_IN_TEXT } from '../auth/token-format.js'
import { isLevelEnabled } from './lazy-request-logger.js'

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** What a token looks like in text, and the query parameter RFC 6750 would carry one in. */
const TOKEN_OR_ITS_PARAMETER = new RegExp(`${TOKEN_IN_TEXT.source}|access_token`, 'i')

/**
 * Accepts a caller's X-Request-Id when it is short and plain (it goes into logs and is echoed),
 * else makes one. One holding a token is replaced too: it would be logged in clear.
 */
export function requestIdFrom(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header
  return value && SAFE_REQUEST_ID.test(value) && !TOKEN_IN_TEXT.test(value) ? value : randomUUID()
}

/**
 * Percent-decoded byte by byte, enough to see ASCII text however it was spelt (`%70st_`,
 * `access%5Ftoken`), and never throwing on bad encoding.
 */
const looselyDecoded = (text: string) =>
  text.includes('%')
    ? text.replace(/%([0-9A-Fa-f]{2})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16)))
    : text

/** A path segment or query pair that holds a token or its secret part, whole. */
const hidingToken = (part: string) => (TOKEN_IN_TEXT.test(looselyDecoded(part)) ? '[redacted]' : part)

/**
 * The request URL as logged. A token sent in the URL (`?access_token=`, RFC 6750's third way,
 * which this API refuses with a 400) must not reach the logs, where the Authorization header never
 * does: the value of any `access_token` parameter, and any path segment or query pair holding
 * something shaped like a token, is replaced, however it is percent-encoded.
 */
export function loggedUrl(url: string | undefined): string | undefined {
  if (url === undefined || !TOKEN_OR_ITS_PARAMETER.test(looselyDecoded(url))) return url
  const question = url.indexOf('?')
  const path = (question === -1 ? url : url.slice(0, question)).split('/').map(hidingToken).join('/')
  if (question === -1) return path
  const query = url
    .slice(question + 1)
    .split('&')
    .map((pair) => {
      const name = pair.split('=', 1)[0] ?? ''
      return /^access_token$/i.test(looselyDecoded(name)) ? `${name}=[redacted]` : hidingToken(pair)
    })
  return `${path}?${query.join('&')}`
}

/** Fields of the one line logged per request. */
export interface RequestLine {
  reqId: string
  /** The client's address: the peer, or with TRUST_PROXY the X-Forwarded-For hop it vouches for. */
  client: string | undefined
  method: string | undefined
  route: string | null
  url: string | undefined
  status: number
}

/**
 * The request line for an answer given outside Fastify's routes (CONNECT, an unsupported Expect),
 * where the observability plugin's onResponse hook never runs.
 */
export function logRequestLine(app: FastifyInstance, line: RequestLine): void {
  if (isLevelEnabled(app.log, 'info')) app.log.info({ ...line, url: loggedUrl(line.url) }, 'request')
}
