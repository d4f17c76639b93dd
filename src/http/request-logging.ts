import { randomUUID } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { isLevelEnabled } from './lazy-request-logger.js'

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** Accepts a caller's X-Request-Id when it is short and plain (it goes into logs), else makes one. */
export function requestIdFrom(header: string | string[] | undefined): string {
  const value = Array.isArray(header) ? header[0] : header
  return value && SAFE_REQUEST_ID.test(value) ? value : randomUUID()
}

/**
 * The request URL as logged. A token sent in the query (`?access_token=`, RFC 6750's third way,
 * which this API refuses with a 401) must not reach the logs, where the Authorization header never
 * does: the value of any `access_token` parameter, and anything shaped like a token, is replaced.
 */
export function loggedUrl(url: string | undefined): string | undefined {
  if (url === undefined || !/pst_|access_token/i.test(url)) return url
  return url.replace(/(access_token=)[^&#]*/gi, '$1[redacted]').replace(/pst_[0-9A-Za-z]+/g, 'pst_[redacted]')
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
  if (isLevelEnabled(app.log, 'info')) app.log.info({ ...line, url: loggedUrl(line.url) }, 'request')
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
        url: loggedUrl(request.url),
        status: reply.statusCode,
        durationMs: Math.round(reply.elapsedTime * 100) / 100,
      },
      'request',
    )
    done()
  })
}
