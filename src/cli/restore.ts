import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { loadConfig } from '../config.js'
import { syncPath } from '../storage/sqlite/backup.js'
import { sqliteMigrations } from '../storage/sqlite/migrations.js'
import { CommandError, printError } from './output.js'
import { counted } from './progress.js'

const NEWEST_SCHEMA = Math.max(...sqliteMigrations.map((m) => m.version))

/**
 * `plant-store restore FILE`: the four manual steps of docs/backups.md as one command. The backup
 * is checked (`PRAGMA integrity_check`, a schema version this build knows), copied next to the
 * store and synced; the store is taken only when no other connection has it open, the replaced
 * store is renamed aside (a complete file of its own), the copy linked into place and the folder
 * synced.
 */
export async function restoreCommand(file: string): Promise<void> {
  const config = loadConfig()
  if (config.databaseUrl) {
    throw new CommandError(
      'restore replaces a SQLite store; for PostgreSQL use pg_restore into an empty database: pg_restore --no-owner --dbname=postgres://USER@HOST/NEW_DB plants.dump (see docs/backups.md)',
    )
  }
  const source = path.resolve(file)
  const store = config.dbPath
  if (source === store) throw new CommandError(`${source}: the backup must be another file than the store`)
  const schema = checkBackup(source)
  const folder = path.dirname(store)
  if (!fs.existsSync(folder))
    throw new CommandError(`${folder}: no such folder for the store (PLANT_STORE_DB)`)
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const copy = path.join(folder, `.${path.basename(store)}.restore-${process.pid}`)
  fs.copyFileSync(source, copy, fs.constants.COPYFILE_EXCL)
  try {
    fs.chmodSync(copy, 0o600)
    syncPath(copy, 'r+')
    const aside = fs.existsSync(store) ? `${store}.before-restore-${stamp}` : undefined
    const held = aside ? takeStore(store) : undefined
    try {
      if (aside) {
        fs.renameSync(store, aside)
        for (const suffix of ['-wal', '-shm', '-journal'])
          if (fs.existsSync(store + suffix)) fs.renameSync(store + suffix, aside + suffix)
      }
      fs.linkSync(copy, store)
      syncPath(folder, 'r')
    } finally {
      held?.exec('ROLLBACK')
      held?.close()
    }
    const size = fs.statSync(store).size
    printError(
      `restored ${store} from ${source} (${counted(size, 'byte')}, schema version ${schema})` +
        (aside ? `; the replaced store is kept as ${aside}` : ''),
    )
  } finally {
    fs.rmSync(copy, { force: true })
  }
}

/** The backup's schema version, once it passes the checks; a CommandError naming what failed. */
function checkBackup(source: string): number {
  let db: Database.Database
  try {
    db = new Database(source, { readonly: true, fileMustExist: true })
  } catch (error) {
    throw new CommandError(`${source}: cannot open the backup: ${(error as Error).message}`)
  }
  try {
    const integrity = db.pragma('integrity_check', { simple: true })
    if (integrity !== 'ok')
      throw new CommandError(`${source}: PRAGMA integrity_check says ${String(integrity)}`)
    const hasTable = db
      .prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'")
      .get()
    if (!hasTable) throw new CommandError(`${source}: not a plant-store store (no schema_migrations table)`)
    const version = (db.prepare('SELECT max(version) FROM schema_migrations').pluck().get() as number) ?? 0
    if (version > NEWEST_SCHEMA)
      throw new CommandError(
        `${source}: schema version ${version} is newer than this build knows (${NEWEST_SCHEMA}); restore it with the plant-store that made it`,
      )
    return version
  } catch (error) {
    if (error instanceof CommandError) throw error
    throw new CommandError(`${source}: not a SQLite store: ${(error as Error).message}`)
  } finally {
    db.close()
  }
}

/**
 * The store, taken for the swap. Leaving WAL mode needs every other connection gone: a running
 * service, another instance or a command holds one open (and with it a lock on the file) for as
 * long as it runs, so SQLITE_BUSY here means the store is in use. It also checkpoints the WAL, so
 * the store renamed aside is complete in one file. BEGIN EXCLUSIVE then keeps a service that starts
 * meanwhile from reading it until the new file is in place.
 */
function takeStore(store: string): Database.Database {
  const db = new Database(store, { fileMustExist: true })
  try {
    db.pragma('busy_timeout = 0')
    const mode = db.pragma('journal_mode = DELETE', { simple: true })
    if (mode !== 'delete')
      throw Object.assign(new Error(`journal_mode stayed ${String(mode)}`), { code: 'SQLITE_BUSY' })
    db.exec('BEGIN EXCLUSIVE')
    return db
  } catch (error) {
    db.close()
    if ((error as { code?: string }).code === 'SQLITE_BUSY')
      throw new CommandError(
        `${store}: the store is in use (a running service or another command has it open); stop the service first (systemctl stop plant-store), then restore`,
      )
    throw error
  }
}
