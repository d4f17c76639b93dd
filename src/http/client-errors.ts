import { maxHeaderSize, type ServerResponse, STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { type ErrorCode, errorCatalog } from '../errors.js'
import { isLevelEnabled } from '../observability/lazy-request-logger.js'
import { securityHeaders } from './security-headers.js'
import { stopLingering } from './lingering-close.js'

type ParserError = Error & { code?: string; reason?: string; rawPacket?: unknown }

/** A request line begins with a method token and a space; a header line has a colon first. */
const REQUEST_LINE_START = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+ /

/**
 * Node's parser reports one overflow for the request line and the headers together; RFC 9112 3
 * wants a 414 when it is the target that is too long. The bytes it was parsing when it gave up
 * tell, when one of their lines alone is over the limit and begins as a request line does (after
 * a pipelined request's bytes too). A request line that arrived in several pieces cannot be told
 * from long headers and stays a 431, whose message names both.
 */
function overflowsInRequestLine(packet: unknown): boolean {
  if (!Buffer.isBuffer(packet) || packet.length <= maxHeaderSize) return false
  for (let start = 0; start < packet.length;) {
    const newline = packet.indexOf(0x0a, start)
    const end = newline === -1 ? packet.length : newline
    const head = packet.subarray(start, Math.min(end, start + 40)).toString('latin1')
    if (end - start > maxHeaderSize && REQUEST_LINE_START.test(head)) return true
    start = end + 1
  }
  return false
}

/** Node's parser and timeout errors as catalog codes, with a message a client can act on. */
function describe(error: ParserError): { code: ErrorCode; message: string } {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return {
      code: 'REQUEST_TIMEOUT',
      message: 'the request did not arrive in time; the connection is closed',
    }
  }
  if (error.code === 'HPE_HEADER_OVERFLOW') {
    return overflowsInRequestLine(error.rawPacket)
      ? {
          code: 'URI_TOO_LONG',
          message: `request line (method, target, version) must not be longer than ${maxHeaderSize} bytes; the connection is closed`,
        }
      : {
          code: 'HEADERS_TOO_LARGE',
          message: `request line and headers must not be larger than ${maxHeaderSize} bytes; the connection is closed`,
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
  // An answer already went out before the body the parser now refuses (lingering-close.ts): one
  // request gets one answer, and the connection is closing.
  if (stopLingering(socket)) return
  const connection = socket as HttpSocket
  // More bytes on a connection already refused meet the same broken parser again.
  if (connection[refusing]) return
  connection[refusing] = true
  const { code, message } = describe(error)
  const status = errorCatalog[code].status
  afterAnswersInProgress(connection, () => {
    if (isLevelEnabled(this.log, 'info')) {
      const client = (socket as Partial<Socket>).remoteAddress
      this.log.info({ status, code, client, parserError: error.code, reason: error.reason }, 'client error')
    }
    answerOnSocket(socket, code, message)
  })
}

const refusing = Symbol('refusingConnection')

/** Node's own fields on a server socket: `_httpMessage` is the answer it is writing now. */
type HttpSocket = Duplex & { _httpMessage?: ServerResponse | null; [refusing]?: true }

/**
 * Runs `then` once the requests that arrived before the bytes the parser refused are answered.
 * A valid request followed, in the same packet, by bytes that are not HTTP was handled (a create
 * stored) but its answer lost: the connection was closed as the parser failed. Node hands the next
 * queued answer the socket in its own `finish` listener, which runs before this one.
 *
 * An answer whose request has not arrived whole is the broken request's own (a body that stopped
 * coming, ended by a FIN, or badly chunked): it will never finish, and waiting for it would hold
 * the connection in CLOSE-WAIT for good, one descriptor lost per client. It is answered at once.
 */
function afterAnswersInProgress(socket: HttpSocket, then: () => void): void {
  const current = socket._httpMessage
  if (!current || socket.destroyed || !current.req.complete) return then()
  let settled = false
  const next = () => {
    if (settled) return
    settled = true
    afterAnswersInProgress(socket, then)
  }
  current.once('finish', next)
  current.once('close', next)
}

/**
 * Writes an Error-shape answer straight to a socket no Fastify reply owns, then closes it: after
 * a parser error the next request cannot be framed, and after a CONNECT (routes/connect.ts) the client
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
    const extra = Object.entries({ ...securityHeaders(undefined), ...headers })
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
  // What the kernel has not yet taken (an earlier answer to a slow reader, say) is lost by
  // destroy(): end first, and close once it is out, or after a bound.
  if (socket.writableLength === 0) return void socket.destroy()
  if (!socket.writableEnded) socket.end()
  const bound = setTimeout(() => socket.destroy(), FLUSH_BOUND_MS).unref()
  socket.once('finish', () => {
    clearTimeout(bound)
    socket.destroy()
  })
}

/** How long a refused connection may take to flush what it still holds to its client. */
const FLUSH_BOUND_MS = 5000
