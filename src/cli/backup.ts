import fs from 'node:fs'
import path from 'node:path'
import { loadConfig } from '../config.js'
import { backupSqliteStore } from '../storage/sqlite/backup.js'
import { CommandError, printError } from './output.js'
import { Progress, count, counted, percent } from './progress.js'

/**
 * `plant-store backup FILE`: a consistent copy of the SQLite store while the service runs. It
 * opens the file itself rather than through the storage port: the backup API works on a plain
 * connection, and a backup must neither migrate nor create the store it copies.
 */
export async function backupCommand(target: string): Promise<void> {
  const config = loadConfig()
  if (config.databaseUrl) {
    throw new CommandError(
      'backup copies a SQLite store; for PostgreSQL use pg_dump: pg_dump --format=custom --file=plants.dump "$DATABASE_URL" (see docs/backups.md)',
    )
  }
  if (!fs.existsSync(config.dbPath))
    throw new CommandError(`no store at ${config.dbPath} (PLANT_STORE_DB); check the path`)
  const destination = path.resolve(target)
  const exists = new CommandError(`${destination} already exists; choose a new file`)
  // Early, to spare the copy; a dangling symbolic link exists too. The copy's final link(2) is the
  // check that holds: it fails on whatever appeared at FILE meanwhile.
  if (lexists(destination)) throw exists
  if (destination === config.dbPath) throw new CommandError('the backup must be another file than the store')
  const progress = new Progress(`backing up ${config.dbPath}`)
  const result = await backupSqliteStore(config.dbPath, destination, (copied, total) =>
    progress.update(`${count(copied)} of ${counted(total, 'page')}, ${percent(copied, total)}`),
  ).catch((error: NodeJS.ErrnoException) => {
    progress.done()
    throw error.code === 'EEXIST' && error.path === destination ? exists : error
  })
  progress.done(counted(result.pages, 'page'))
  printError(`backed up ${config.dbPath} to ${destination} (${counted(result.bytes, 'byte')})`)
}

/** Whether anything, a dangling symbolic link included, is at `file`. */
function lexists(file: string): boolean {
  try {
    fs.lstatSync(file)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw error
  }
}
