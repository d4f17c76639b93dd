/**
 * What both SQLite connections share: opening the file with the right pragmas, migrations, and
 * turning rows into port values. The main thread's connection (reads) and the writer thread's
 * connection (every write) both open through here.
 */
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import type { Delivery, Plant, TokenRecord } from '../storage.js'
import { sqliteMigrations } from './migrations.js'

export interface SqliteOptions {
  path: string
  /** `full` fsyncs every commit (survives power loss); `normal` survives a process crash. */
  synchronous: 'full' | 'normal'
  /** How long a write waits for another process's write lock before failing; default 5000. */
  busyTimeoutMs?: number
  /** Most create requests one group commit takes; default 256. Bounds the latency of a batch. */
  maxBatch?: number
}

export type Row = Record<string, unknown>

export const DEFAULT_BUSY_TIMEOUT_MS = 5000
export const DEFAULT_MAX_BATCH = 256

/**
 * Per-connection settings. Page caches: better-sqlite3 defaults to 16 MiB per connection; the two
 * connections together stay within that (RSS budget), which still keeps the B-tree interior pages
 * of a 10M-plant table and its tag index (about 3 MiB) hot; leaves of random ids would miss any
 * cache of this size and come from the OS page cache. Checkpoints run inside the COMMIT that
 * crosses the threshold and each fsyncs the WAL and the database file. Measured with 64 writers
 * and synchronous=FULL: at SQLite's default of 1000 pages they roughly halved create throughput on
 * a 10M store; at 4000 pages (a WAL of about 16 MiB) creates ran 1.3-1.5x faster on both an empty
 * and a 10M store, at the price of a longer pause (p99) whenever one runs on a big store; 10000
 * pages gained little more and paused longer.
 */
const ROLES = {
  main: { migrate: true, cacheKiB: 4096, autocheckpointPages: 1000 },
  writer: { migrate: false, cacheKiB: 8192, autocheckpointPages: 4000 },
} as const

const toDate = (value: unknown): Date | null =>
  value === null || value === undefined ? null : new Date(Number(value))

/** A plant row; a NULL tag becomes an absent key, never `undefined` or `null`. */
export function toPlant(row: Row): Plant {
  const plant: Plant = { id: row.id as bigint, name: row.name as string }
  if (row.tag !== null) plant.tag = row.tag as string
  return plant
}

export function toToken(row: Row): TokenRecord {
  return {
    id: row.id as string,
    name: row.name as string,
    scopes: (row.scopes as string).split(',').filter(Boolean),
    hash: row.token_hash as string,
    createdAt: new Date(Number(row.created_at)),
    expiresAt: toDate(row.expires_at),
    lastUsedAt: toDate(row.last_used_at),
    revokedAt: toDate(row.revoked_at),
  }
}

export function toDelivery(row: Row): Delivery {
  return {
    id: row.id as string,
    subscriptionId: row.subscription_id as string,
    plantId: BigInt(row.plant_id as bigint),
    payload: row.payload as string,
    status: row.status as Delivery['status'],
    attempts: Number(row.attempts),
    nextAttemptAt: new Date(Number(row.next_attempt_at)),
    lastAttemptAt: toDate(row.last_attempt_at),
    lastStatus: row.last_status === null ? null : Number(row.last_status),
    lastError: (row.last_error as string | null) ?? null,
    createdAt: new Date(Number(row.created_at)),
  }
}

/**
 * Applies pending migrations; BEGIN IMMEDIATE serialises processes that start together. It reads
 * only `schema_migrations`, so opening a store of any size costs the same.
 */
export function migrateSqlite(db: Database.Database): number[] {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
  const applied: number[] = []
  for (const migration of sqliteMigrations) {
    const run = db.transaction(() => {
      const done = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(migration.version)
      if (done) return
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
  return applied
}

/**
 * Opens the file (creating its folder), sets WAL and the durability level. The `main` connection
 * (reads) migrates; the `writer` thread opens a file that connection has already migrated.
 */
export function openSqliteDatabase(
  options: SqliteOptions,
  role: keyof typeof ROLES = 'main',
): Database.Database {
  const settings = ROLES[role]
  fs.mkdirSync(path.dirname(options.path), { recursive: true })
  const db = new Database(options.path)
  try {
    db.pragma('journal_mode = WAL')
    db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`)
    db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS}`)
    db.pragma(`cache_size = -${settings.cacheKiB}`)
    db.pragma(`wal_autocheckpoint = ${settings.autocheckpointPages}`)
    if (settings.migrate) migrateSqlite(db)
    return db
  } catch (error) {
    db.close()
    throw error
  }
}
