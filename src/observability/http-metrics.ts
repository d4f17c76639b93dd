import type { FastifyInstance, FastifyRequest } from 'fastify'
import { errorResponses } from '../schemas/error.js'
import {
  collectProcessMetrics,
  countRequest,
  metricsRegistry,
  requestsInFlight,
  type StoreGauges,
  watchStore,
} from './metrics.js'

/** The route label of a request no route matched (a 404): the raw URL would be unbounded. */
const NO_ROUTE = '(none)'

const inFlight = Symbol('counted in flight')
type Counted = FastifyRequest & { [inFlight]?: boolean }

/** Counts every request that reaches Fastify's hooks, by route pattern, method and status, and those in flight. */
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
    const pattern = request.routeOptions.url ?? NO_ROUTE
    countRequest(pattern, request.method, reply.statusCode, reply.elapsedTime / 1000)
    done()
  })
}

/** GET /metrics, public like the probes; registered after the OpenAPI plugin, which documents it. */
export function metricsRoute(app: FastifyInstance): void {
  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'metrics',
        tags: ['service'],
        summary: 'Prometheus metrics of this process',
        description:
          'Request, store, webhook, authentication and Node process metrics in the Prometheus text format; needs no token. Off with METRICS=false; served on METRICS_PORT instead when that is set.',
        security: [],
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
          ...errorResponses(),
        },
      },
    },
    async (_request, reply) => {
      reply.type(metricsRegistry.contentType)
      return metricsRegistry.metrics()
    },
  )
}
