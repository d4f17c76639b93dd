/**
 * What the SQLite connections share: opening the file with the right pragmas, migrations, and
 * turning rows into port values.
 */
import type { CommitObserver } from '../storage.js'
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { recordReaders } from '../rows.js'
import { checkSchemaNotNewer } from '../schema-version.js'
import { sqliteMigrations } from './migrations.js'

export interface SqliteOptions {
  path: string
  /** SQLite's `synchronous` on the writer: `full` syncs every commit (survives power loss); `normal` survives a process crash. */
  synchronous: 'full' | 'normal'
  /** How long a write waits for another process's write lock before failing; default 5000. */
  busyTimeoutMs?: number
  /** Most create requests one group commit takes; default 256. Bounds the latency of a batch. */
  maxBatch?: number
  /** Told of each migration as it begins: on a big store one may take a while. */
  onMigration?: MigrationListener
  /** Told of each group commit answered (metrics). */
  observer?: CommitObserver
}

/** Hears of a pending migration just before it is applied. */
export type MigrationListener = (version: number, name: string) => void

export const DEFAULT_BUSY_TIMEOUT_MS = 5000
export const DEFAULT_MAX_BATCH = 256

/**
 * The two connections of a store, both in WAL mode, at the store's `synchronous` level: SQLite
 * makes every sync itself, and neither checkpoints on its own (`wal_autocheckpoint = 0`). Page
 * caches: better-sqlite3 defaults to 16 MiB per connection; together they stay within that (RSS
 * budget), which still keeps the B-tree interior pages of a 10M-plant table and its tag index
 * (about 3 MiB) hot.
 *
 * - `main` reads, and migrates on open.
 * - `writer` makes every write, in the writer thread (`writer-thread.ts`), which checkpoints after
 *   a commit that leaves the WAL over 1000 pages and checks the result, so the WAL stays bounded
 *   under steady writes and a failed checkpoint stops the store. Its busy timeout is 0: the
 *   group-commit writer retries a locked BEGIN on timers, so that each write waits at most the
 *   busy timeout from its arrival.
 */
const ROLES = {
  main: { migrate: true, cacheKiB: 4096, busy: true },
  writer: { migrate: false, cacheKiB: 8192, busy: false },
} as const

/** SQLite keeps times as epoch milliseconds. */
export const { toToken, toDelivery, toAttempt } = recordReaders((value) => new Date(Number(value)))

/**
 * Applies pending migrations; BEGIN IMMEDIATE serialises processes that start together. It reads
 * only `schema_migrations`, so opening a store of any size costs the same.
 */
export function migrateSqlite(db: Database.Database, onMigration?: MigrationListener): number[] {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
  const applied: number[] = []
  for (const migration of sqliteMigrations) {
    const run = db.transaction(() => {
      const done = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(migration.version)
      if (done) return
      onMigration?.(migration.version, migration.name)
      db.exec(migration.sql)
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
        migration.version,
        migration.name,
        Date.now(),
      )
      applied.push(migration.version)
    })
    run.immediate()
  }
  const newest = db.prepare('SELECT max(version) FROM schema_migrations').pluck().get() as number | null
  checkSchemaNotNewer(newest, sqliteMigrations.at(-1)?.version ?? 0)
  return applied
}

/**
 * Opens the file (creating its folder), sets WAL and the durability level of `role` (see ROLES).
 * The `main` connection migrates; the others open a file it has already migrated.
 */
export function openSqliteDatabase(
  options: SqliteOptions,
  role: keyof typeof ROLES = 'main',
): Database.Database {
  const settings = ROLES[role]
  ensureFolder(path.dirname(options.path))
  createPrivately(options.path)
  const db = new Database(options.path)
  try {
    db.pragma('journal_mode = WAL')
    db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`)
    db.pragma(`busy_timeout = ${settings.busy ? (options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS) : 0}`)
    db.pragma(`cache_size = -${settings.cacheKiB}`)
    // SQLite's automatic checkpoint drops its errors; the writer thread checkpoints itself.
    db.pragma('wal_autocheckpoint = 0')
    if (settings.migrate) migrateSqlite(db, options.onMigration)
    return db
  } catch (error) {
    db.close()
    throw error
  }
}

/**
 * A new store file is made readable by this user only: it holds token hashes and webhook signing
 * secrets, and SQLite gives its WAL and shared memory the database file's mode. With the usual
 * umask a store came out world-readable. An existing file keeps the mode its operator gave it.
 */
function createPrivately(file: string): void {
  try {
    fs.closeSync(fs.openSync(file, 'wx', 0o600))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
}

/**
 * `mkdir -p`, by hand (new folders private, as the store's files are): on a filesystem that answers ENOENT although the parent exists (a path
 * under /proc), `fs.mkdirSync(folder, { recursive: true })` loops forever in Node 20, and a bad
 * PLANT_STORE_DB hung the process instead of failing it.
 */
function ensureFolder(folder: string): void {
  const missing: string[] = []
  for (let dir = folder; !fs.existsSync(dir); dir = path.dirname(dir)) missing.unshift(dir)
  for (const dir of missing) {
    try {
      fs.mkdirSync(dir, { mode: 0o700 })
    } catch (error) {
      // Another process starting on the same store may have made it first.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
  }
}
