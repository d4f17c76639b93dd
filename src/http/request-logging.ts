import { randomUUID } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { isLevelEnabled } from './lazy-request-logger.js'

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** Accepts a caller's X-Request-Id when it is short and plain (it goes into logs), else makes one. */
export function requestIdFrom(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header
  return value && SAFE_REQUEST_ID.test(value) ? value : randomUUID()
}

/** Fields of the one line logged per request. */
interface RequestLine {
  reqId: string
  method: string | undefined
  route: string | null
  url: string | undefined
  status: number
}

/**
 * The request line for an answer given outside Fastify's routes (CONNECT, an unsupported Expect),
 * where the onResponse hook below never runs.
 */
export function logRequestLine(app: FastifyInstance, line: RequestLine): void {
  if (isLevelEnabled(app.log, 'info')) app.log.info(line, 'request')
}

/**
 * One JSON line per request, written when the response is done; headers are never logged. The
 * hooks take callbacks rather than being async: each async hook costs every request a promise.
 */
export function installRequestLogging(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    done()
  })
  // At warn and above the line would be dropped anyway; skip building it.
  if (!isLevelEnabled(app.log, 'info')) return
  // Through the root logger with the id as a field, the same line a request's child would write,
  // so that the request never needs its own child logger (see lazy-request-logger.ts).
  app.addHook('onResponse', (request, reply, done) => {
    app.log.info(
      {
        reqId: request.id,
        method: request.method,
        route: request.routeOptions.url ?? null,
        url: request.url,
        status: reply.statusCode,
        durationMs: Math.round(reply.elapsedTime * 100) / 100,
      },
      'request',
    )
    done()
  })
}
