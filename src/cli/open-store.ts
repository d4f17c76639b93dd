import type { Storage } from '../storage/storage.js'

/**
 * Opens the store (from the environment's configuration) once a command has checked its own
 * arguments: a wrong command line exits 2 whatever state the store is in, and creates no store
 * file. A command that never calls it never opens one. Only a command that adds something
 * (`tokens create`, `webhooks add`, `migrate`) may create a SQLite store that is not there yet:
 * `webhooks deliveries` on a mistyped PLANT_STORE_DB made a new empty store and reported
 * "nothing", where the operator needed to hear that the path is wrong.
 */
export type OpenStore = (options?: { create?: boolean }) => Promise<Storage>
