import type { IncomingMessage, Server } from 'node:http'
import net, { type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
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
 * How long a drain keeps a connection that has sent nothing: one accepted just before the drain may
 * hold a request still unread in the kernel's buffer, while a preconnect would hold the drain.
 */
export const SILENT_GRACE_MS = 2000

/**
 * Stops accepting connections and keeps those already open. http.Server's close() would also close
 * the idle ones, and Node 26 counts among them a connection whose request has not been read yet
 * (Node 20 to 24 do not); net.Server's close(), which it extends, leaves them to the drain.
 */
export function stopAccepting(server: Server): void {
  net.Server.prototype.close.call(server)
}

export interface SilentConnections {
  /** Resolves once every connection that has sent nothing has been open for SILENT_GRACE_MS. */
  settled(): Promise<void>
  /**
   * Closes the connections that have sent nothing. Before Node 26 closeIdleConnections() leaves
   * them open, and server.close() stops the headers timeout that would close them: a preconnect
   * would otherwise hold the shutdown for all of SHUTDOWN_TIMEOUT_MS.
   */
  close(): void
}

export function silentConnections(server: Server): SilentConnections {
  const openedAt = new Map<Socket, number>()
  server.on('connection', (socket: Socket) => {
    openedAt.set(socket, performance.now())
    socket.once('close', () => openedAt.delete(socket))
  })
  const anyYoung = () => {
    const since = performance.now() - SILENT_GRACE_MS
    for (const [socket, at] of openedAt) if (socket.bytesRead === 0 && at > since) return true
    return false
  }
  return {
    async settled() {
      while (anyYoung()) await sleep(50)
    },
    close() {
      for (const socket of openedAt.keys()) if (socket.bytesRead === 0) socket.destroy()
    },
  }
}
