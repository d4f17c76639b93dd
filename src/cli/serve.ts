import cluster from 'node:cluster'
import net from 'node:net'
import { type Config, ConfigError } from '../config.js'
import { type Background, createServer, exitOnSignals } from '../server.js'
import { openStorage } from '../storage/open.js'
import { DeliveryWorker } from '../webhooks/delivery-worker.js'
import { answerClusterScrapes, startMetricsServer } from '../observability/metrics-server.js'
import { commitObserver, readObserver } from '../observability/metrics.js'
import { storeLocation } from '../observability/store-location.js'
import { startTracing } from '../observability/start-tracing.js'
import { proxyTrust } from '../http/client-address.js'
import { primaryLogger, runCluster, STORE_FAILED } from './cluster.js'
import { announceNewStore, storeIsMissing } from './open-store.js'

/**
 * `plant-store serve [--workers N|auto]`: HTTP on HOST:PORT until SIGTERM or SIGINT. With more than
 * one worker this process becomes a node:cluster primary and each worker (which re-runs this same
 * command) takes the path below. `workers` and `config` are checked by the caller (program.ts).
 */
export async function serveCommand(workers: number, config: Config): Promise<void> {
  const missing = storeIsMissing(config)
  const opened = await openStorage(config, config.metrics ? { observer: commitObserver, readObserver } : {})
  if (missing && cluster.isPrimary) announceNewStore(config)
  if (workers > 1 && cluster.isPrimary) {
    // Opening the store has applied any pending migration, once, before a worker starts.
    await opened.close()
    // Every worker would fail to listen and say so; say it once, before forking any.
    if (config.port !== 0) await assertCanListen(config)
    if (config.metricsPort !== undefined) {
      const metrics = await startMetricsServer(config, { cluster: true })
      primaryLogger(config.logLevel)('info', { url: metrics.url }, `metrics of all workers at ${metrics.url}`)
    }
    return runCluster({ workers, config })
  }
  // A worker answers the primary's scrapes from the start, so none waits on one still starting.
  if (config.metricsPort !== undefined && cluster.isWorker) answerClusterScrapes()
  const trusted = proxyTrust(config.trustProxy)
  const tracing = await startTracing(config, (peer) => trusted(peer, 0))
  const storage = tracing ? tracing.traceStorage(opened) : opened
  // The shutdown reads this list when it runs, so the worker (which needs the app's logger) can
  // join it after creation; shutdown stops it after HTTP and before the store closes.
  const background: Background[] = []
  const server = await createServer(config, storage, background, { tracing })
  // Handlers go in before the port opens: a signal right after "listening" must still drain.
  exitOnSignals(server)
  // Joined now, so that a signal during listen stops it; started once the port is open, so that a
  // process that cannot listen does not log a worker it never ran (a shutdown stops it before start).
  const worker = config.webhookWorker
    ? new DeliveryWorker({ storage, config, logger: server.app.log, tracing })
    : undefined
  if (worker) background.push(worker)
  if (tracing) background.push(tracing)
  const location = storeLocation(config)
  server.app.log.info(location.fields, location.message)
  for (const warning of storage.warnings) server.app.log.warn(warning)
  if (config.trustProxy === true) server.app.log.warn({ trustProxy: true }, TRUST_ANY_PROXY)
  storage.onFatal?.((error) => {
    // The process stays up for reads and /readyz says 503: alone, until its supervisor or operator
    // restarts it; a worker, until the primary has started its replacement and stops it (its
    // exit would close the port once every worker had failed).
    const restart = cluster.isWorker
      ? 'this worker answers until the primary has started its replacement'
      : 'restart the service'
    server.app.log.fatal({ err: error }, `the store takes no more writes: ${restart}`)
    if (cluster.isWorker) process.send?.(STORE_FAILED)
  })
  const noUsableToken = (await storage.countUsableTokens(new Date())) === 0
  try {
    await server.listen()
  } catch (error) {
    await server.shutdown('could not listen')
    throw cannotListen(config, error)
  }
  worker?.start()
  // Right after "listening", in the same turn, so that even a service stopped at once says it.
  if (noUsableToken) {
    server.app.log.warn(
      'no usable API token yet: create one with `npm run --silent cli -- tokens create --name admin` (or `plant-store tokens create --name admin`)',
    )
  }
  if (config.metricsPort !== undefined && !cluster.isWorker) {
    const metrics = await startMetricsServer(config).catch(async (error: unknown) => {
      await server.shutdown('could not listen for metrics')
      throw new ConfigError(
        `METRICS_PORT: cannot listen on ${config.host}:${config.metricsPort}: ${(error as Error).message}`,
      )
    })
    background.push(metrics)
    server.app.log.info({ url: metrics.url }, `metrics at ${metrics.url}`)
  }
}

/** docs/security.md#behind-a-proxy: warned, not refused, since a firewall may be what makes it safe. */
export const TRUST_ANY_PROXY =
  "TRUST_PROXY=true believes X-Forwarded-For from every peer: a client that reaches this port directly chooses its own address, so the failed-authentication limit and the per-address connection cap do not hold for it; set TRUST_PROXY to the proxies' addresses instead"

const cannotListen = (config: Config, error: unknown) =>
  new ConfigError(
    `HOST and PORT: cannot listen on ${config.host}:${config.port}: ${(error as Error).message}`,
    {
      cause: error,
    },
  )

/** Binds HOST:PORT for a moment, as the cluster's workers are about to. */
function assertCanListen(config: Config): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer()
    probe.once('error', (error) => reject(cannotListen(config, error)))
    probe.listen({ port: config.port, host: config.host, exclusive: true }, () =>
      probe.close(() => resolve()),
    )
  })
}
