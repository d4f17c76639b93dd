import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'

/** How Node's own server recognises a 100-continue expectation (lib/_http_server.js). */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i
const JSON_MEDIA_TYPE = /^\s*application\/json\s*(?:;|$)/i

/**
 * RFC 9110 10.1.1. Node answers `100 Continue` as soon as the headers arrive, before any hook
 * runs, so a client uploaded its whole body only to hear 401, 405 or 413; and it answered any
 * other expectation with a bare 417 that no hook saw or logged. Both now reach Fastify: an unknown
 * expectation is a 417 in the Error shape, and the interim 100 is sent by the route that reads a
 * body, once the request has passed every check that does not need the body (`sendContinue`).
 */
export function installExpectHandling(app: FastifyInstance): void {
  const server = app.server
  server.on('checkContinue', (req, res) => server.emit('request', req, res))
  server.on('checkExpectation', (req, res) => server.emit('request', req, res))
  app.addHook('onRequest', refuseUnknownExpectation)
}

function refuseUnknownExpectation(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: (error?: Error) => void,
) {
  const expect = request.headers.expect
  // Node applies expectations to HTTP/1.1 only (RFC 9110: an HTTP/1.0 one is ignored).
  if (expect === undefined || request.raw.httpVersion !== '1.1' || CONTINUE.test(expect)) return done()
  done(
    new ApiError('EXPECTATION_FAILED', `Expect header "${expect}" is not supported: only 100-continue is`, {
      details: [{ field: 'Expect', rule: 'must be absent or 100-continue' }],
    }),
  )
}

/**
 * Sends the interim `100 Continue` a client asked for, unless the body would be refused unread:
 * larger than the limit (Fastify answers 413 from Content-Length alone) or not JSON (415).
 */
export function sendContinue(request: FastifyRequest, reply: FastifyReply, bodyLimit: number): void {
  const { headers } = request
  if (headers.expect === undefined || request.raw.httpVersion !== '1.1' || !CONTINUE.test(headers.expect))
    return
  if (Number(headers['content-length'] ?? 0) > bodyLimit) return
  if (!JSON_MEDIA_TYPE.test(headers['content-type'] ?? '')) return
  reply.raw.writeContinue()
}
