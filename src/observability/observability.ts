import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { errorCatalog } from '../errors.js'
import { named } from '../hook-order.js'
import type { Storage } from '../storage/storage.js'
import { isLevelEnabled } from './lazy-request-logger.js'
import { collectProcessMetrics, countInFlight, RouteSeries, watchStore } from './metrics.js'
import { loggedUrl } from './request-line.js'
import { refusedBeforeRouting } from './route-label.js'
import type { RequestSpan, Tracing } from './tracing.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The id (never the secret) of the token that authenticated this request, for the log. */
    tokenId: string | null
  }
}

/**
 * The route label of a request refused before its route's own checks: no route matched (404), a
 * method the path does not take (405), a bad or missing Host, framing the service does not
 * support. The raw URL would be unbounded; one label keeps a flood of them to a few series.
 */
export const NO_ROUTE = '(none)'

/** The methods some route answers; any other of the 30-odd Node accepts is counted as `other`. */
const METHOD_LABELS = ['GET', 'HEAD', 'POST', 'DELETE', 'OPTIONS', 'other']

/** The statuses the API answers with (the catalog's and its successes); any other is `other`. */
const STATUS_LABELS: readonly (number | 'other')[] = [
  ...[
    ...new Set([200, 201, 204, 302, 304, ...Object.values(errorCatalog).map((entry) => entry.status)]),
  ].sort((a, b) => a - b),
  'other',
]

const labelIndex = (labels: readonly unknown[], value: unknown) => {
  const index = labels.indexOf(value)
  return index === -1 ? labels.length - 1 : index
}

export interface ObservabilityOptions {
  /** METRICS: count requests (the scrape-time gauges read `store`). */
  metrics: boolean
  store: Storage
  tracing: Tracing | undefined
}

const counted = Symbol('counted in flight')
const spanOf = Symbol('request span')
type Observed = FastifyRequest & { [counted]?: boolean; [spanOf]?: RequestSpan }

/**
 * One observation per request: started in one onRequest hook (the X-Request-Id answer header, the
 * in-flight count, the span), written in one onResponse hook (the request line, the request
 * metrics, the span's end). Each part is on only when configured: the line at LOG_LEVEL info or
 * below, the metrics with METRICS, the span with tracing. What each costs per request is in
 * docs/performance.md#where-a-requests-instructions-go (bench/instructions.sh).
 */
function observability(app: FastifyInstance, options: ObservabilityOptions, next: () => void): void {
  const { metrics, tracing } = options
  const logs = isLevelEnabled(app.log, 'info')
  app.decorateRequest('tokenId', null)
  app.decorateRequest(counted, false)
  app.decorateRequest(spanOf, undefined)
  if (metrics) {
    collectProcessMetrics()
    watchStore(options.store)
    app.addHook('onClose', (_app, done) => {
      watchStore(undefined)
      done()
    })
  }
  const series = new Map<string, RouteSeries>()
  const seriesOf = (route: string) => {
    let found = series.get(route)
    if (!found) {
      found = new RouteSeries(route, METHOD_LABELS, STATUS_LABELS)
      series.set(route, found)
    }
    return found
  }

  const start = (request: Observed, reply: FastifyReply, done: () => void) => {
    reply.header('x-request-id', request.id)
    if (metrics) {
      request[counted] = true
      countInFlight(1)
    }
    if (!tracing) return done()
    const span = tracing.startRequest(request)
    request[spanOf] = span
    tracing.within(span, done)
  }

  const leave = (request: Observed) => {
    if (!request[counted]) return
    request[counted] = false
    countInFlight(-1)
  }

  const finish = (request: Observed, reply: FastifyReply, done: () => void) => {
    const route = request.routeOptions.url
    const status = reply.statusCode
    const elapsedMs = reply.elapsedTime
    if (metrics) {
      leave(request)
      const label = route === undefined || refusedBeforeRouting(request) ? NO_ROUTE : route
      const method = labelIndex(METHOD_LABELS, request.method)
      seriesOf(label).observe(method, labelIndex(STATUS_LABELS, status), elapsedMs / 1000)
    }
    // Through the root logger with the id as a field, the same line a request's child would write,
    // so that the request never needs its own child logger (see lazy-request-logger.ts).
    if (logs) {
      app.log.info(
        {
          reqId: request.id,
          client: request.ip,
          tokenId: request.tokenId,
          method: request.method,
          route: route ?? null,
          url: loggedUrl(request.url),
          status,
          durationMs: Math.round(elapsedMs * 100) / 100,
        },
        'request',
      )
    }
    const span = request[spanOf]
    if (span) {
      request[spanOf] = undefined
      tracing?.endRequest(span, request.method, route, status)
    }
    done()
  }

  // A client that goes away before its answer gets no onResponse.
  const abandon = (request: Observed, done: () => void) => {
    leave(request)
    const span = request[spanOf]
    if (span) {
      request[spanOf] = undefined
      tracing?.endRequest(span, request.method, request.routeOptions.url, undefined)
    }
    done()
  }

  app.addHook('onRequest', named(app, 'observability: start', start))
  // The handler runs from the body parser's callbacks, outside the context onRequest entered.
  if (tracing) {
    app.addHook(
      'preHandler',
      named(app, 'observability: span context', (request: Observed, _reply, done: () => void) => {
        const span = request[spanOf]
        if (span) tracing.within(span, done)
        else done()
      }),
    )
  }
  if (metrics || logs || tracing) app.addHook('onResponse', named(app, 'observability: finish', finish))
  if (metrics || tracing) app.addHook('onRequestAbort', named(app, 'observability: abandon', abandon))
  next()
}

export default fp(observability, { name: 'observability', dependencies: ['protocol'] })
