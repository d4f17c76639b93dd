import { type IncomingMessage, maxHeaderSize } from 'node:http'
import { ApiError } from '../errors.js'

/** Node's `maxHeadersCount` default: header lines past it never reach `rawHeaders`. */
export const MAX_HEADER_LINES = 2000

/**
 * The 431 for a request whose header block Node's own limits do not see whole, or undefined.
 * Node drops the lines past `maxHeadersCount` but its parser still frames the message with them:
 * a second Authorization or a `Transfer-Encoding: gzip, chunked` there went unchecked. And Node
 * counts only the names and values against its 16 KiB limit, not the ": " and CRLF of each line:
 * 17,014 bytes of short headers passed. This counts the block as a client writes it,
 * `Name: value` lines included, with the request line.
 */
export function headerBlockRefusal(req: IncomingMessage): ApiError | undefined {
  const raw = req.rawHeaders
  const tooMany = raw.length / 2 >= MAX_HEADER_LINES
  // "METHOD target HTTP/1.1\r\n" and the empty line that ends the block.
  let size = (req.method?.length ?? 0) + (req.url?.length ?? 0) + 12 + 2
  for (let i = 0; i < raw.length && !tooMany; i++) size += (raw[i] as string).length + 2
  if (!tooMany && size <= maxHeaderSize) return undefined
  const rule = `must be at most ${maxHeaderSize} bytes in fewer than ${MAX_HEADER_LINES} lines`
  return new ApiError(
    'HEADERS_TOO_LARGE',
    tooMany
      ? `request has ${MAX_HEADER_LINES} or more header lines: the request line and headers ${rule}; the connection is closed`
      : `request line and headers are ${size} bytes: they ${rule}; the connection is closed`,
    { headers: { connection: 'close' }, details: [{ field: 'headers', rule }] },
  )
}
