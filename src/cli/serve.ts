import { parseArgs } from 'node:util'
import type { Config } from '../config.js'
import { exitOnSignals, startServer } from '../server.js'
import type { Storage } from '../storage/storage.js'

/** `plant-store serve`: HTTP on HOST:PORT until SIGTERM or SIGINT. */
export async function serveCommand(config: Config, storage: Storage, args: string[]): Promise<void> {
  parseArgs({ args, options: {}, strict: true })
  const server = await startServer(config, storage)
  exitOnSignals(server)
  if ((await storage.countUsableTokens(new Date())) === 0) {
    server.app.log.warn(
      'no usable API token yet: create one with `npm run cli -- tokens create --name admin` (or `plant-store tokens create --name admin`)',
    )
  }
}
