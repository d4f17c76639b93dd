import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'

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
 * An onRequest hook for RFC 9112 3.2: a request with more than one Host line, or a Host that is not
 * a plain host[:port], is a 400, and so is an HTTP/1.1 request without one (HTTP/1.0 may omit it).
 * Node would answer the missing case itself with an empty 400 (the server sets requireHostHeader
 * false so that this answers it in the Error shape) and keeps only the first of several.
 */
export function requireHost(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: (error?: Error) => void,
): void {
  const { host } = request.headers
  if (host === undefined) {
    const { httpVersionMajor, httpVersionMinor } = request.raw
    return done(
      httpVersionMajor === 1 && httpVersionMinor === 0 ? undefined : hostError('is required in HTTP/1.1'),
    )
  }
  if (!PLAIN_HOST.test(host))
    return done(hostError('must be a host name or address, with an optional port of 0-65535'))
  const raw = request.raw.rawHeaders
  let lines = 0
  for (let i = 0; i < raw.length; i += 2)
    if (raw[i]?.length === 4 && raw[i]?.toLowerCase() === 'host') lines++
  done(lines > 1 ? hostError('must be sent once') : undefined)
}
