import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { metricsRegistry } from '../observability/metrics.js'
import { errorResponses } from '../schemas/error.js'

/**
 * GET /metrics for a token with the metrics:read scope, each token's scrapes rate-limited:
 * it names the Node version, the process's limits and the webhook backlog, and each scrape
 * collects every metric. Registered after the OpenAPI plugin, which documents it.
 */
function metricsRoute(app: FastifyInstance, _options: unknown, next: () => void): void {
  app.get(
    '/metrics',
    {
      onRequest: app.bearerAuth('metrics:read', 'scrape'),
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
  next()
}

export default fp(metricsRoute, {
  name: 'routes-metrics',
  dependencies: ['contract', 'auth', 'observability'],
})
