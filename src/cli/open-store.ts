import { existsSync } from 'node:fs'
import type { Config } from '../config.js'
import type { Storage } from '../storage/storage.js'
import { notice } from './progress.js'

/**
 * Opens the store (from the environment's configuration) once a command has checked its own
 * arguments: a wrong command line exits 2 whatever state the store is in, and creates no store
 * file. A command that never calls it never opens one. Only a command that adds something
 * (`tokens create`, `webhooks add`, `import`, `migrate`) may create a SQLite store that is not
 * there yet: `webhooks deliveries` on a mistyped PLANT_STORE_DB made a new empty store and
 * reported "nothing", where the operator needed to hear that the path is wrong. `tune` overrides
 * settings for this command's own connection (a bulk import's batch size).
 */
export type OpenStore = (options?: {
  create?: boolean
  tune?: Partial<Config>
  onMigration?: (version: number, name: string) => void
}) => Promise<Storage>

/** True when opening the store will make a new SQLite file. */
export const storeIsMissing = (config: Config): boolean => !config.databaseUrl && !existsSync(config.dbPath)

/**
 * Said on stderr whenever a command made a new store, with its absolute path: a token created
 * from another folder once went, unnoticed, into a second, empty store.
 */
export function announceNewStore(config: Config): void {
  notice(`created a new SQLite store at ${config.dbPath}`)
}
