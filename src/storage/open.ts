import { ConfigError, type Config } from '../config.js'
import { nativeAddonMismatch } from './sqlite/native-addon.js'
import { SqliteStorage } from './sqlite/sqlite-storage.js'
import type { CommitObserver, ReadObserver, Storage } from './storage.js'

/**
 * The one place an adapter is chosen: PostgreSQL when DATABASE_URL is set, else the SQLite file.
 * Opening applies pending migrations; `onMigration` hears of each as it begins.
 * A store that cannot be opened stops the start with one line naming the variable to look at,
 * not a stack trace.
 */
export async function openStorage(
  config: Config,
  options: {
    observer?: CommitObserver
    /** Hears where plant reads ran, with DATABASE_READ_URL. */
    readObserver?: ReadObserver
    /** Hears of each pending migration as it begins. */
    onMigration?: (version: number, name: string) => void
  } = {},
): Promise<Storage> {
  if (config.databaseUrl) {
    const { openPostgresStorage } = await import('./postgres/postgres-storage.js')
    try {
      return await openPostgresStorage({
        url: config.databaseUrl,
        readUrl: config.databaseReadUrl,
        poolSize: config.dbPoolSize,
        statementTimeoutMs: config.dbStatementTimeoutMs,
        onMigration: options.onMigration,
        observer: options.observer,
        readObserver: options.readObserver,
      })
    } catch (error) {
      throw new ConfigError(`DATABASE_URL: cannot open the PostgreSQL store: ${(error as Error).message}`, {
        cause: error,
      })
    }
  }
  try {
    return new SqliteStorage({
      path: config.dbPath,
      synchronous: config.sqliteSync,
      maxBatch: config.sqliteMaxBatch,
      busyTimeoutMs: config.sqliteBusyTimeoutMs,
      onMigration: options.onMigration,
      observer: options.observer,
    })
  } catch (error) {
    // Not the store's fault: the same path opens once the addon matches this Node.js.
    const mismatch = nativeAddonMismatch(error)
    if (mismatch) throw new ConfigError(mismatch, { cause: error })
    throw new ConfigError(
      `PLANT_STORE_DB: cannot open the SQLite store ${config.dbPath}: ${(error as Error).message}`,
      { cause: error },
    )
  }
}
