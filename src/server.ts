import type { FastifyInstance } from 'fastify'
import { type AppOptions, buildApp } from './app.js'
import type { Config } from './config.js'
import { silentConnections, stopAccepting } from './http/drain.js'
import type { Storage } from './storage/storage.js'

export interface RunningServer {
  app: FastifyInstance
  /** Binds HOST:PORT; separate from creation so signal handlers can be installed first. */
  listen(): Promise<void>
  /** Stops accepting, lets requests in flight finish (bounded), then closes the store. */
  shutdown(reason: string): Promise<void>
}

/** Something that runs beside the HTTP server (the webhook worker) and must stop before the store closes. */
export interface Background {
  stop(): Promise<void>
}

export async function createServer(
  config: Config,
  storage: Storage,
  background: Background[] = [],
  options: Omit<AppOptions, 'draining'> = {},
): Promise<RunningServer> {
  let stopping: Promise<void> | undefined
  const app = await buildApp(config, storage, { ...options, draining: () => stopping !== undefined })
  const silent = silentConnections(app.server)

  const shutdown = (reason: string) => {
    stopping ??= (async () => {
      app.log.info({ reason }, 'shutting down: finishing requests in flight, if any')
      const deadline = setTimeout(() => {
        app.log.warn(
          { timeoutMs: config.shutdownTimeoutMs },
          'shutdown timeout: closing remaining connections',
        )
        app.server.closeAllConnections()
      }, config.shutdownTimeoutMs)
      let reaper: NodeJS.Timeout | undefined
      try {
        // Until the silent connections have had their grace, idle ones stay open too: a request
        // sent on one is answered, with Connection: close.
        stopAccepting(app.server)
        await silent.settled()
        // A keep-alive socket that finishes its request mid-drain would otherwise idle until its
        // timeout; close such sockets as soon as they fall idle, and those that never sent a byte.
        reaper = setInterval(() => {
          app.server.closeIdleConnections()
          silent.close()
        }, 100)
        await app.close()
        await Promise.all(background.map((task) => task.stop()))
      } finally {
        clearInterval(reaper)
        clearTimeout(deadline)
        await storage.close()
      }
      app.log.info('stopped')
    })()
    return stopping
  }
  const listen = async () => {
    await app.listen({ port: config.port, host: config.host })
  }
  return { app, listen, shutdown }
}

/** Creates and binds in one step, for callers that handle signals themselves (tests). */
export async function startServer(
  config: Config,
  storage: Storage,
  background: Background[] = [],
  options: Omit<AppOptions, 'draining'> = {},
): Promise<RunningServer> {
  const server = await createServer(config, storage, background, options)
  await server.listen()
  return server
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
