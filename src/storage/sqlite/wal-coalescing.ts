/**
 * Loads the WAL write-coalescing VFS (`native/wal-coalesce.c`, compiled by
 * `scripts/build-native.mjs` at `npm install` and `npm run build`) into this process's SQLite.
 * SQLite writes each WAL frame with two `pwrite` calls, and a create with a random id writes about
 * two frames; the shim hands a commit's frames to the kernel in one call. It changes no byte of
 * any file, only how many calls write them, and a commit's frames are all written before its
 * COMMIT returns (the reasoning is at the top of the C file). Without the compiled library the
 * store works the same, with more system calls per commit.
 */
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'

export type WalCoalescing = { state: 'on' } | { state: 'off' } | { state: 'unavailable'; reason: string }

/** Where the build script puts the library, relative to the package root. */
export const WAL_COALESCE_LIBRARY = path.join('build', 'wal-coalesce.so')

let loaded: WalCoalescing | undefined

/**
 * Makes the shim the process's default VFS, once: every SQLite connection opened afterwards (on
 * any thread) writes through it. Asked not to, it does nothing; a process where an earlier store
 * already loaded it stays on, since a VFS cannot be taken back from open connections.
 */
export function loadWalCoalescing(wanted: boolean): WalCoalescing {
  if (loaded?.state === 'on') return loaded
  if (!wanted) return { state: 'off' }
  loaded ??= load()
  return loaded
}

function load(): WalCoalescing {
  const library = libraryPath()
  if (!fs.existsSync(library)) {
    return {
      state: 'unavailable',
      reason: `${library} is missing (run \`npm run build\`; it needs a C compiler)`,
    }
  }
  const db = new Database(':memory:')
  try {
    db.loadExtension(library)
    return { state: 'on' }
  } catch (error) {
    return { state: 'unavailable', reason: `${library} did not load: ${(error as Error).message}` }
  } finally {
    db.close()
  }
}

/**
 * Gives `db` the library's SQL functions (see native/wal-coalesce.c) when wanted and the library
 * loads; returns whether it did. Loading it on `db` registers the shim as well, which the store's
 * own loadWalCoalescing has already done. `sync_database_file()`: without it the checkpointer
 * leaves the database file's sync to SQLite, which is only slower (the RESTART's hold is longer).
 * `discard_last_commit()`: without it a commit whose WAL sync failed may be there after a restart.
 */
export function addWalFunctions(db: Database.Database, wanted: boolean): boolean {
  if (!wanted) return false
  try {
    db.loadExtension(libraryPath())
    return true
  } catch {
    return false
  }
}

const libraryPath = () => path.join(packageRoot(), WAL_COALESCE_LIBRARY)

/** The nearest folder above this module with a package.json: dist/src/... and dist/bundle alike. */
function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url))
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir)
    if (parent === dir) return process.cwd()
    dir = parent
  }
  return dir
}
