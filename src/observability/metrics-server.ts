import http from 'node:http'
import type { AddressInfo } from 'node:net'
import client from 'prom-client'
import type { Config } from '../config.js'
import { METRICS_MAX_CONNECTIONS } from '../descriptor-budget.js'
import { metricsRegistry } from './metrics.js'

/** A metrics listener on METRICS_PORT, for a scraper on a private network. */
export interface MetricsServer {
  url: string
  stop(): Promise<void>
}

/**
 * Serves GET /metrics (and nothing else) on HOST:METRICS_PORT. In a `serve --workers N` primary,
 * `cluster` makes it answer with every worker's metrics summed (prom-client's AggregatorRegistry),
 * the workers answering through answerClusterScrapes.
 */
export async function startMetricsServer(
  config: Pick<
    Config,
    'host' | 'metricsPort' | 'headersTimeoutMs' | 'requestTimeoutMs' | 'keepAliveTimeoutMs'
  >,
  { cluster = false }: { cluster?: boolean } = {},
): Promise<MetricsServer> {
  const aggregator = cluster ? new client.AggregatorRegistry() : undefined
  // Capped and timed out as the API is (app.ts), within the descriptor budget: a flood of idle
  // connections here must not take the descriptors the API and the store need.
  const options: http.ServerOptions = {
    headersTimeout: config.headersTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    connectionsCheckingInterval: 500,
  }
  const server = http.createServer(options, (request, response) => {
    const path = (request.url ?? '').split('?')[0]
    if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
      const status = path === '/metrics' ? 405 : 404
      const message =
        status === 405
          ? `${request.method} is not allowed on /metrics; use GET`
          : 'only /metrics is served here'
      response.writeHead(status, {
        'content-type': 'application/json; charset=utf-8',
        ...(status === 405 ? { allow: 'GET, HEAD' } : {}),
      })
      response.end(JSON.stringify({ error: status, message }))
      return
    }
    const text = aggregator ? aggregator.clusterMetrics() : metricsRegistry.metrics()
    text.then(
      (body) => {
        response.writeHead(200, { 'content-type': metricsRegistry.contentType })
        response.end(request.method === 'HEAD' ? undefined : body)
      },
      (error: Error) => {
        response.writeHead(503, { 'content-type': 'application/json; charset=utf-8' })
        response.end(
          JSON.stringify({ error: 503, message: `metrics could not be collected: ${error.message}` }),
        )
      },
    )
  })
  server.keepAliveTimeout = config.keepAliveTimeoutMs
  server.maxConnections = METRICS_MAX_CONNECTIONS
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ port: config.metricsPort, host: config.host }, () => {
      server.removeListener('error', reject)
      resolve()
    })
  })
  // accept() failing with no descriptor left is an 'error' event: without a listener, a crash.
  // The scraper retries at its next interval.
  server.on('error', () => {})
  const { address, port } = server.address() as AddressInfo
  const host = address.includes(':') ? `[${address}]` : address
  return {
    url: `http://${host}:${port}/metrics`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

/** In a cluster worker: answer the primary's requests for this process's metrics. */
export function answerClusterScrapes(): void {
  new client.AggregatorRegistry()
}
