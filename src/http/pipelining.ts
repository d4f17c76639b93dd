import type { Duplex } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'

/** `upgrade` among the Connection header's options: with an Upgrade header, what Node's parser stops at. */
const UPGRADE_TOKEN = /(?:^|,)\s*upgrade\s*(?:,|$)/i

/**
 * HTTP/1.1 pipelining (requests sent on one connection without waiting for the answers) handled
 * as RFC 9112 9.3.2 asks: answers in request order, which Node does, and requests handled in that
 * order too, which Node does not. It hands every pipelined request to the app as soon as it is
 * parsed, so a POST, a DELETE of the same id and a GET sent in one write ran side by side: the
 * DELETE answered 404 and the GET missed the plant that the POST, answered 200 first, had stored.
 * Node gives a request's response no socket while an earlier answer on the connection is still
 * in progress; such a request now waits for its socket before any other hook runs. One whose
 * connection was reset while it waited is never handled: nobody is left to hear the answer. (After
 * a mere FIN it is handled: the client may have only shut its sending side, see app.ts.)
 *
 * Part of the first onRequest hook (http/protocol.ts), before any hook that does work.
 */
// After an answer that closed the connection (Connection: close), Node still handed a request
// parsed behind it the ended socket: a create was stored and its answer lost. It is not handled.
const open = (socket: Duplex) => !socket.destroyed && !socket.writableEnded

export function inRequestOrder(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
  // Node's parser stops at a request asking to switch protocols and, with no upgrade handler,
  // dropped whatever was pipelined behind it unread, leaving the connection open. Closing it
  // after this answer tells the client that nothing behind it was taken (RFC 9112 9.3.2).
  if (request.headers.upgrade !== undefined && UPGRADE_TOKEN.test(request.headers.connection ?? '')) {
    reply.header('connection', 'close')
  }
  const response = reply.raw
  if (response.socket) {
    if (open(response.socket)) done()
    return
  }
  // Node hands the socket on when the answer before is done, also after the connection closed.
  response.once('socket', (socket) => {
    if (open(socket)) done()
  })
}
