import { maxHeaderSize, STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { type ErrorCode, errorCatalog } from '../errors.js'
import { isLevelEnabled } from './lazy-request-logger.js'

type ParserError = Error & { code?: string; reason?: string }

/** Node's parser and timeout errors as catalog codes, with a message a client can act on. */
function describe(error: ParserError): { code: ErrorCode; message: string } {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return {
      code: 'REQUEST_TIMEOUT',
      message: 'the request did not arrive in time; the connection is closed',
    }
  }
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    return {
      code: 'HEADERS_TOO_LARGE',
      message: `request headers must not be larger than ${maxHeaderSize} bytes; the connection is closed`,
    }
  }
  const reason = (error.reason ?? 'unparsable request').replace(/\.$/, '')
  return {
    code: 'BAD_HTTP_REQUEST',
    message: `request is not valid HTTP/1.1: ${reason}; the connection is closed`,
  }
}

/**
 * Fastify's `clientErrorHandler`: what Node's HTTP parser refuses (an unknown method, a header
 * line without a colon, Content-Length with Transfer-Encoding, oversized headers, a trickling
 * client) never reaches a route. Fastify's default answers those in a shape of its own
 * (`"error": "Bad Request"`) and logs them at trace; this answers in the API's Error shape and
 * logs one line, as for any request.
 */
export function clientErrorHandler(this: FastifyInstance, error: ParserError, socket: Duplex): void {
  // A reset connection has nobody left to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  const { code, message } = describe(error)
  const status = errorCatalog[code].status
  if (isLevelEnabled(this.log, 'info')) {
    this.log.info({ status, code, parserError: error.code, reason: error.reason }, 'client error')
  }
  answerOnSocket(socket, code, message)
}

/**
 * Writes an Error-shape answer straight to a socket no Fastify reply owns, then closes it: after
 * a parser error the next request cannot be framed, and after a CONNECT (connect.ts) the client
 * sends tunnel bytes, not HTTP. `headers` values are sent as is: only values the server made.
 */
export function answerOnSocket(
  socket: Duplex,
  code: ErrorCode,
  message: string,
  headers: Record<string, string> = {},
): void {
  const status = errorCatalog[code].status
  if (socket.writable) {
    const body = JSON.stringify({ error: status, message, code })
    const extra = Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('')
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        extra +
        'Connection: close\r\n\r\n' +
        body,
    )
  }
  socket.destroy()
}
