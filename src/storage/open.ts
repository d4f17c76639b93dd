import type { Config } from '../config.js'
import { SqliteStorage } from './sqlite/sqlite-storage.js'
import type { Storage } from './storage.js'

/** The one place an adapter is chosen: PostgreSQL when DATABASE_URL is set, else the SQLite file. */
export async function openStorage(config: Config): Promise<Storage> {
  if (config.databaseUrl) {
    const { openPostgresStorage } = await import('./postgres/postgres-storage.js')
    return openPostgresStorage({
      url: config.databaseUrl,
      poolSize: config.dbPoolSize,
      statementTimeoutMs: config.dbStatementTimeoutMs,
    })
  }
  return new SqliteStorage({
    path: config.dbPath,
    synchronous: config.sqliteSync,
    maxBatch: config.sqliteMaxBatch,
    busyTimeoutMs: config.sqliteBusyTimeoutMs,
  })
}
