import type { Storage } from '../storage/storage.js'

/**
 * Opens the store (from the environment's configuration) once a command has checked its own
 * arguments: a wrong command line exits 2 whatever state the store is in, and creates no store
 * file. A command that never calls it never opens one.
 */
export type OpenStore = () => Promise<Storage>
