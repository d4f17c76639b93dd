import type { IncomingMessage, Server } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyReply, FastifyRequest } from 'fastify'

const requestsSeen = Symbol('requestsSeen')
const position = Symbol('positionOnItsConnection')
type CountingSocket = Socket & { [requestsSeen]?: number }
type NumberedRequest = IncomingMessage & { [position]?: number }

/** Numbers a request on its connection, for `closeWhenLast`; costs two property writes. */
export function numberOnConnection(request: FastifyRequest): void {
  const socket = request.raw.socket as CountingSocket
  const seen = (socket[requestsSeen] ?? 0) + 1
  socket[requestsSeen] = seen
  ;(request.raw as NumberedRequest)[position] = seen
}

/**
 * During a drain the answer to the last request a connection has sent says `Connection: close`,
 * also when that request arrived before the drain began (Fastify marks only requests routed after
 * it). Such an answer said keep-alive, the server closed the idle socket a moment later, and a
 * client that reused it then lost its next request to a reset instead of opening a new connection.
 * An answer with requests pipelined behind it stays keep-alive, so that those are still answered;
 * answers leave in request order, whatever order they are ready in. The numbering runs in the
 * first onRequest hook, before any that could fail and skip it (http/protocol.ts).
 */
export function closeWhenLast(request: FastifyRequest, reply: FastifyReply): void {
  const last = (request.raw.socket as CountingSocket)[requestsSeen]
  const mine = (request.raw as NumberedRequest)[position]
  if (mine === undefined || mine === last) reply.header('connection', 'close')
}

/**
 * Returns what closes, during a drain, the connections that have not sent a byte. Node's
 * closeIdleConnections() leaves them open (it counts a connection as busy from its start, so that
 * the headers timeout also covers a client that never sends anything), and server.close() stops
 * the checks of that timeout: one such connection (a browser's or a proxy's preconnect) held every
 * shutdown for all of SHUTDOWN_TIMEOUT_MS. Closing one loses no request: none has begun on it.
 */
export function silentConnectionCloser(server: Server): () => void {
  const open = new Set<Socket>()
  server.on('connection', (socket: Socket) => {
    open.add(socket)
    socket.once('close', () => open.delete(socket))
  })
  return () => {
    for (const socket of open) if (socket.bytesRead === 0) socket.destroy()
  }
}
