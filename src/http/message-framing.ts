import type { FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'
import { headerBlockRefusal } from './header-block.js'
import { refuseBeforeRouting } from '../observability/route-label.js'

/** After either refusal the rest of what the client sends cannot be trusted to be framed as ours. */
const CLOSE = { connection: 'close' }

/**
 * The refusal, in the request checks (request-checks.ts), of what Node's parser lets through but cannot honour. A request line naming
 * HTTP/2.0 or HTTP/0.9 was served as HTTP/1.1; it is a 505 (RFC 9110 15.6.6). A Transfer-Encoding
 * other than `chunked` alone (`gzip, chunked`, `x-custom, chunked`) was read as plain chunked and
 * its body stored as sent, codings unapplied; it is a 501 (RFC 9112 6.1). An HTTP/1.0 request
 * with any Transfer-Encoding is a 400 (RFC 9112 6.1: the framing is faulty); one was decoded as
 * chunked and the connection kept for the next request. A header block Node's limits do not see
 * whole is a 431 (header-block.ts). All of them close the connection.
 */
export function framingRefusal(request: FastifyRequest): Error | undefined {
  const { httpVersionMajor, httpVersion } = request.raw
  if (httpVersionMajor !== 1) {
    const rule = 'must name HTTP/1.1 or HTTP/1.0'
    return refuseBeforeRouting(
      request,
      new ApiError(
        'HTTP_VERSION_NOT_SUPPORTED',
        `HTTP/${httpVersion} is not supported: the request line ${rule}`,
        {
          headers: CLOSE,
          details: [{ field: 'request line', rule }],
        },
      ),
    )
  }
  const headerBlock = headerBlockRefusal(request.raw)
  if (headerBlock) return refuseBeforeRouting(request, headerBlock)
  const coding = request.headers['transfer-encoding']
  if (coding !== undefined && request.raw.httpVersionMinor === 0) {
    const rule = 'must be absent in HTTP/1.0'
    return refuseBeforeRouting(
      request,
      new ApiError(
        'BAD_HTTP_REQUEST',
        `Transfer-Encoding is not allowed in an HTTP/1.0 request: it ${rule}; the connection is closed`,
        { headers: CLOSE, details: [{ field: 'Transfer-Encoding', rule }] },
      ),
    )
  }
  if (coding !== undefined && coding.trim().toLowerCase() !== 'chunked') {
    const rule = 'must be absent or chunked'
    return refuseBeforeRouting(
      request,
      new ApiError(
        'UNSUPPORTED_TRANSFER_CODING',
        `Transfer-Encoding "${coding}" is not supported: it ${rule}`,
        { headers: CLOSE, details: [{ field: 'Transfer-Encoding', rule }] },
      ),
    )
  }
  return undefined
}
