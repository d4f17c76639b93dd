import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import { PassThrough } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'

/** How long, and how many more bytes, an answered request's unread body is read and discarded. */
export interface LingerBounds {
  ms: number
  bytes: number
}

const lingering = Symbol('lingeringClose')
type LingeringSocket = Duplex & { [lingering]?: () => void }

/**
 * For the parser's refusal of a body whose request is being answered (client-errors.ts): the
 * answer on its way goes out now and the connection closes after it, lingering or not. True when
 * there was such an answer: the request needs no other.
 */
export function stopLingering(socket: Duplex): boolean {
  const stop = (socket as LingeringSocket)[lingering]
  if (stop) stop()
  return stop !== undefined
}

const hasBody = (req: IncomingMessage) =>
  req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0

/**
 * nginx's lingering close, for an answer sent before its request's body was read (401, 404, 405,
 * 413, any refusal before parsing). Node either read such a body to its end, whatever its size, on
 * a kept-alive connection, or, after `Connection: close`, closed the socket with body bytes still
 * unread, and the kernel's reset then lost the answer at the client. Now the answer says
 * `Connection: close` and is sent whole (with its Content-Length) at once; the body that follows is
 * read and discarded until it ends, for at most `bounds.ms` and `bounds.bytes`; then the response
 * ends and Node closes the connection. A body that has arrived by the next turn of the event loop
 * (a small one, in the same packets as the headers) needs none of this: the connection stays open.
 */
export function lingerIfBodyUnread(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  done: (error: null, payload: unknown) => void,
  bounds: LingerBounds,
): void {
  const req = request.raw
  if (req.complete || !hasBody(req) || reply.raw.headersSent) return done(null, payload)
  const socket = req.socket as LingeringSocket
  let decided = false
  const send = (linger: boolean) => {
    if (decided) return
    decided = true
    delete socket[lingering]
    done(null, linger ? lingeringPayload(request, reply, payload, bounds) : payload)
  }
  socket[lingering] = () => {
    reply.header('connection', 'close')
    send(false)
  }
  setImmediate(() => send(!(req.complete || req.destroyed)))
}

/** The answer as a stream that ends once the unread body has ended or a bound is reached. */
function lingeringPayload(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  bounds: LingerBounds,
): unknown {
  const body = typeof payload === 'string' || Buffer.isBuffer(payload) ? payload : ''
  reply.header('connection', 'close')
  reply.header('content-length', String(Buffer.byteLength(body)))
  const req = request.raw
  const socket = req.socket as LingeringSocket
  const stream = new PassThrough()
  stream.write(body)
  let discarded = 0
  const finish = () => {
    clearTimeout(timer)
    req.off('data', discard)
    // Node stops reading the socket once the paused request's buffer is full.
    req.pause()
    delete socket[lingering]
    if (!stream.writableEnded) stream.end()
  }
  const discard = (chunk: Buffer) => {
    discarded += chunk.length
    // Past the bound the connection closes with bytes unread: a reset, which this client earned.
    if (discarded > bounds.bytes) finish()
  }
  const timer = setTimeout(finish, bounds.ms).unref()
  socket[lingering] = finish
  req.on('data', discard)
  req.once('end', finish)
  req.once('close', finish)
  return stream
}
