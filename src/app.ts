import Fastify, { type FastifyInstance } from 'fastify'
import auth from './auth/auth.js'
import type { Config } from './config.js'
import { HookOrder } from './hook-order.js'
import contract from './http/contract.js'
import cors from './http/cors.js'
import protocol from './http/protocol.js'
import requestChecks from './http/request-checks.js'
import requestDeadline from './http/request-deadline.js'
import { serverOptions } from './http/server-options.js'
import observability from './observability/observability.js'
import type { Tracing } from './observability/tracing.js'
import openapi from './openapi/document.js'
import docsRoutes from './routes/docs.js'
import healthRoutes from './routes/health.js'
import metricsRoute from './routes/metrics.js'
import plantRoutes from './routes/plants.js'
import unroutedRoutes from './routes/unrouted.js'
import type { Storage } from './storage/storage.js'

export interface AppOptions {
  /** True once a graceful shutdown has begun (server.ts). */
  draining?: () => boolean
  /** A span per request (observability/tracing.ts), when tracing is on. */
  tracing?: Tracing
  /** Test only: `app.hookOrder` records the hooks each request ran, in order. */
  recordHookOrder?: boolean
}

/**
 * The only way the HTTP app is built: the server, the CLI and every test call this with a config
 * and a storage adapter. It does not listen; see server.ts. The plugins are registered in the order
 * their hooks run (docs/development.md#the-request-pipeline); each names those it needs before it.
 */
export async function buildApp(
  config: Config,
  storage: Storage,
  options: AppOptions = {},
): Promise<FastifyInstance> {
  const app = Fastify(await serverOptions(config))
  app.decorate('hookOrder', options.recordHookOrder ? new HookOrder() : undefined)
  // Served here unless METRICS_PORT takes them elsewhere (observability/metrics-server.ts).
  const servesMetrics = config.metrics && config.metricsPort === undefined

  await app.register(protocol, { config, draining: options.draining })
  await app.register(observability, { metrics: config.metrics, store: storage, tracing: options.tracing })
  if (storage.kind === 'postgres') await app.register(requestDeadline)
  await app.register(requestChecks, { config })
  await app.register(contract, { config })
  await app.register(openapi)
  await app.register(docsRoutes)
  await app.register(auth, { config, storage })
  await app.register(plantRoutes, { storage })
  await app.register(healthRoutes, { storage })
  await app.register(cors, { origins: config.corsOrigins })
  if (servesMetrics) await app.register(metricsRoute)
  await app.register(unroutedRoutes, { servesMetrics })
  await app.ready()
  return app
}
