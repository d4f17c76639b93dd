import type { FastifyInstance, FastifyRequest } from 'fastify'
import { requireScope } from '../auth/bearer-auth.js'
import type { TokenVerifier } from '../auth/token-verifier.js'
import { errorCatalog } from '../errors.js'
import type { AuthLimits } from '../http/rate-limits.js'
import { refusedBeforeRouting } from '../http/unrouted.js'
import { errorResponses } from '../schemas/error.js'
import {
  collectProcessMetrics,
  countRequest,
  metricsRegistry,
  requestsInFlight,
  type StoreGauges,
  watchStore,
} from './metrics.js'

/**
 * The route label of a request refused before its route's own checks: no route matched (404), a
 * method the path does not take (405), a bad or missing Host, framing the service does not
 * support. The raw URL would be unbounded; one label keeps a flood of them to a few series.
 */
export const NO_ROUTE = '(none)'

/** The methods some route answers; any other of the 30-odd Node accepts is counted as `other`. */
export const METHOD_LABELS: readonly string[] = ['GET', 'HEAD', 'POST', 'DELETE', 'OPTIONS']

/** The statuses the API answers with (the catalog's and its successes); any other is `other`. */
export const STATUS_LABELS: readonly number[] = [
  ...new Set([200, 201, 204, 302, 304, ...Object.values(errorCatalog).map((entry) => entry.status)]),
].sort((a, b) => a - b)

const methodLabel = (method: string) => (METHOD_LABELS.includes(method) ? method : 'other')
const statusLabel = (status: number) => (STATUS_LABELS.includes(status) ? status : 'other')

const inFlight = Symbol('counted in flight')
type Counted = FastifyRequest & { [inFlight]?: boolean }

/**
 * Counts every request that reaches Fastify's hooks, by route pattern, method and status, and
 * those in flight. Each label takes a fixed set of values, so that no client can add series.
 */
export function installHttpMetrics(app: FastifyInstance, store: StoreGauges): void {
  collectProcessMetrics()
  watchStore(store)
  app.addHook('onClose', (_app, done) => {
    watchStore(undefined)
    done()
  })
  app.addHook('onRequest', (request: Counted, _reply, done) => {
    request[inFlight] = true
    requestsInFlight.inc()
    done()
  })
  const leave = (request: Counted) => {
    if (!request[inFlight]) return
    request[inFlight] = false
    requestsInFlight.dec()
  }
  // A client that goes away before its answer gets no onResponse.
  app.addHook('onRequestAbort', (request, done) => {
    leave(request)
    done()
  })
  app.addHook('onResponse', (request, reply, done) => {
    leave(request)
    const pattern = refusedBeforeRouting(request) ? NO_ROUTE : (request.routeOptions.url ?? NO_ROUTE)
    const seconds = reply.elapsedTime / 1000
    countRequest(pattern, methodLabel(request.method), statusLabel(reply.statusCode), seconds)
    done()
  })
}

/**
 * GET /metrics for a token with the metrics:read scope, each token's scrapes rate-limited:
 * it names the Node version, the process's limits and the webhook backlog, and each scrape
 * collects every metric. Registered after the OpenAPI plugin, which documents it.
 */
export function metricsRoute(app: FastifyInstance, verifier: TokenVerifier, limits: AuthLimits): void {
  app.get(
    '/metrics',
    {
      onRequest: requireScope(verifier, 'metrics:read', { failed: limits.failed, used: limits.scrapes }),
      schema: {
        operationId: 'metrics',
        tags: ['service'],
        summary: 'Prometheus metrics of this process',
        description:
          'Request, store, webhook, authentication and Node process metrics in the Prometheus text format, for a token with the metrics:read scope; at most METRICS_RATE_LIMIT scrapes per token per METRICS_RATE_WINDOW_MS (default 60 a minute), then 429. The webhook backlog gauges are read from the store at most once every 5 s. Off with METRICS=false; served on METRICS_PORT instead (without a token, for a private network) when that is set.',
        security: [{ bearerAuth: [] }],
        response: {
          200: {
            description: 'The Prometheus text exposition format, version 0.0.4',
            content: {
              'text/plain': {
                schema: { type: 'string' },
                example:
                  '# HELP plant_store_http_requests_total HTTP requests answered, by route pattern, method and status\n' +
                  '# TYPE plant_store_http_requests_total counter\n' +
                  'plant_store_http_requests_total{route="/plants",method="POST",status="200"} 3\n',
              },
            },
          },
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (_request, reply) => {
      reply.type(metricsRegistry.contentType)
      return metricsRegistry.metrics()
    },
  )
}
