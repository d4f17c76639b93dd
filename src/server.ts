import type { FastifyInstance } from 'fastify'
import { buildApp } from './app.js'
import type { Config } from './config.js'
import type { Storage } from './storage/storage.js'

export interface RunningServer {
  app: FastifyInstance
  /** Stops accepting, lets requests in flight finish (bounded), then closes the store. */
  shutdown(reason: string): Promise<void>
}

/** Something that runs beside the HTTP server (the webhook worker) and must stop before the store closes. */
export interface Background {
  stop(): Promise<void>
}

export async function startServer(
  config: Config,
  storage: Storage,
  background: Background[] = [],
): Promise<RunningServer> {
  const app = await buildApp(config, storage)
  await app.listen({ port: config.port, host: config.host })
  let stopping: Promise<void> | undefined

  const shutdown = (reason: string) => {
    stopping ??= (async () => {
      app.log.info({ reason }, 'shutting down: finishing requests in flight')
      const deadline = setTimeout(() => {
        app.log.warn({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown timeout: closing remaining connections')
        app.server.closeAllConnections()
      }, config.shutdownTimeoutMs)
      try {
        await app.close()
        await Promise.all(background.map((task) => task.stop()))
      } finally {
        clearTimeout(deadline)
        await storage.close()
      }
      app.log.info('stopped')
    })()
    return stopping
  }
  return { app, shutdown }
}

/** SIGTERM and SIGINT both drain and exit 0; a second signal does not cut the drain short. */
export function exitOnSignals(server: RunningServer): void {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      server.shutdown(signal).then(
        () => process.exit(0),
        (error) => {
          server.app.log.error({ err: error }, 'shutdown failed')
          process.exit(1)
        },
      )
    })
  }
}
