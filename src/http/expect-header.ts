import type { IncomingMessage, ServerResponse } from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { errorCatalog } from '../errors.js'
import { logRequestLine, requestIdFrom } from '../observability/request-line.js'
import { securityHeaders } from './security-headers.js'

/**
 * An Expect field value whose every member is `100-continue` (RFC 9110 10.1.1; repeated fields
 * arrive joined with commas). Node's own test (lib/_http_server.js) finds the token anywhere, so
 * `x-100-continue` and `foo, 100-continue` were taken for it.
 */
function isContinueOnly(expect: string): boolean {
  // Empty list members (`100-continue,`) are allowed and mean nothing (RFC 9110 5.6.1).
  const members = expect.split(',').map((member) => member.trim().toLowerCase())
  const named = members.filter((member) => member !== '')
  return named.length > 0 && named.every((member) => member === '100-continue')
}

const JSON_MEDIA_TYPE = /^\s*application\/json\s*(?:;|$)/i

/**
 * RFC 9110 10.1.1. Node answers `100 Continue` as soon as the headers arrive, before any hook
 * runs, so a client uploaded its whole body only to hear 401, 405 or 413; and it answered any
 * other expectation with a bare, unlogged 417. Now a 100-continue request reaches Fastify without
 * the interim answer, which the route that reads a body sends once the request has passed every
 * check that does not need the body (`sendContinue`); any other expectation is answered here, in
 * the Error shape, without a hook that every request would pay for. Node applies expectations to
 * HTTP/1.1 only (RFC 9110: an HTTP/1.0 one is ignored).
 */
export function installExpectHandling(app: FastifyInstance): void {
  const server = app.server
  const refuse = (req: IncomingMessage, res: ServerResponse) => {
    const reqId = requestIdFrom(req.headers['x-request-id'])
    const rule = 'must be absent or 100-continue'
    const { status } = errorCatalog.EXPECTATION_FAILED
    const body = JSON.stringify({
      error: status,
      message: `Expect header "${req.headers.expect}" is not supported: only 100-continue is`,
      code: 'EXPECTATION_FAILED',
      details: [{ field: 'Expect', rule }],
    })
    // The body that may follow is never read, so the connection cannot carry another request.
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'x-request-id': reqId,
      ...securityHeaders(req.url),
      connection: 'close',
    })
    res.end(body)
    logRequestLine(app, {
      reqId,
      client: app.clientAddressOf(req),
      method: req.method,
      route: null,
      url: req.url,
      status,
    })
  }
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (isContinueOnly(req.headers.expect ?? '')) server.emit('request', req, res)
    else refuse(req, res)
  })
  server.on('checkExpectation', refuse)
}

/**
 * Sends the interim `100 Continue` a client asked for, unless the body would be refused unread:
 * larger than the limit (Fastify answers 413 from Content-Length alone) or not JSON (415).
 */
export function sendContinue(request: FastifyRequest, reply: FastifyReply, bodyLimit: number): void {
  const { headers } = request
  if (headers.expect === undefined || request.raw.httpVersion !== '1.1') return
  if (Number(headers['content-length'] ?? 0) > bodyLimit) return
  if (!JSON_MEDIA_TYPE.test(headers['content-type'] ?? '')) return
  reply.raw.writeContinue()
}
