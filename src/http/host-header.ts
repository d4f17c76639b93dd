import type { FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'
import { refuseBeforeRouting } from '../observability/route-label.js'

/**
 * RFC 3986 reg-name (which covers IPv4) or a bracketed IPv6 address, with an optional port that a
 * TCP connection could have (0-65535): `x:99999` was echoed into the next-page Link, where no
 * client could follow it.
 */
export const PLAIN_HOST =
  /^(?:[A-Za-z0-9._~!$&'()*+,;=%-]+|\[[0-9A-Fa-f:.]+\])(?::(?:\d{1,4}|[0-5]\d{4}|6[0-4]\d{3}|65[0-4]\d{2}|655[0-2]\d|6553[0-5]))?$/

const hostError = (rule: string) =>
  new ApiError('VALIDATION_FAILED', `Host header ${rule}`, { details: [{ field: 'Host', rule }] })

/**
 * Fields a request may carry once (RFC 9110 5.3): Node keeps only the first of several, and a
 * proxy in front that reads the last would disagree with the service about the credential or
 * the body's type. Keyed by the length of the lower-cased name, which rules out most lines cheaply.
 */
const SINGLE_FIELDS: Record<number, { lower: string; shown: string; bit: number }> = {
  4: { lower: 'host', shown: 'Host', bit: 1 },
  12: { lower: 'content-type', shown: 'Content-Type', bit: 2 },
  13: { lower: 'authorization', shown: 'Authorization', bit: 4 },
}

/**
 * The request checks' (request-checks.ts) refusal for RFC 9112 3.2: a request with a Host that is not a plain host[:port] is a
 * 400, and so is an HTTP/1.1 request without one (HTTP/1.0 may omit it), and a request with more
 * than one Host, Authorization or Content-Type line. Node would answer the missing Host itself
 * with an empty 400 (the server sets requireHostHeader false so that this answers it in the
 * Error shape) and keeps only the first of several.
 */
export function hostRefusal(request: FastifyRequest): Error | undefined {
  const { host } = request.headers
  if (host === undefined) {
    const { httpVersionMajor, httpVersionMinor } = request.raw
    return httpVersionMajor === 1 && httpVersionMinor === 0
      ? undefined
      : refuseBeforeRouting(request, hostError('is required in HTTP/1.1'))
  }
  if (!PLAIN_HOST.test(host))
    return refuseBeforeRouting(
      request,
      hostError('must be a host name or address, with an optional port of 0-65535'),
    )
  const raw = request.raw.rawHeaders
  let seen = 0
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string
    const single = SINGLE_FIELDS[name.length]
    if (single === undefined || name.toLowerCase() !== single.lower) continue
    if (seen & single.bit) return refuseBeforeRouting(request, sentTwice(single.shown))
    seen |= single.bit
  }
  return undefined
}

const sentTwice = (field: string) =>
  new ApiError('VALIDATION_FAILED', `${field} header must be sent once`, {
    details: [{ field, rule: 'must be sent once' }],
  })
