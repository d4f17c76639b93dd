import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'

/** Pages copied per step (4 MiB of 4 KiB pages): progress moves, and each step stays short. */
const PAGES_PER_STEP = 1024

export interface BackupResult {
  pages: number
  bytes: number
}

/**
 * Copies the SQLite store at `source` to `destination` with SQLite's online backup API, while
 * other processes (the service) go on writing. The copy runs inside one read transaction of its
 * own, so every step copies the same snapshot: the backup holds every commit made before it began,
 * and a write meanwhile can neither tear it nor restart it (SQLite restarts a backup whose source
 * another connection changed between steps; in WAL mode that snapshot blocks no writer). The file
 * is written beside `destination`, private to this user (it holds token hashes and webhook
 * secrets), checked with `PRAGMA quick_check`, and only then linked into place, which fails with
 * EEXIST, leaving what is there alone, when anything is at `destination` by then.
 */
export async function backupSqliteStore(
  source: string,
  destination: string,
  onProgress: (copiedPages: number, totalPages: number) => void,
): Promise<BackupResult> {
  const partial = path.join(
    path.dirname(destination),
    `.${path.basename(destination)}.partial-${process.pid}`,
  )
  // Read-only: as the last connection on the file, a writable one would checkpoint the WAL into
  // it on close and drop any error of that checkpoint; this one never writes the store.
  const db = new Database(source, { fileMustExist: true, readonly: true })
  try {
    db.pragma('busy_timeout = 5000')
    db.exec('BEGIN')
    // A read takes the snapshot now; BEGIN alone would defer it to the first step.
    db.prepare('SELECT count(*) FROM sqlite_schema').get()
    fs.closeSync(fs.openSync(partial, 'wx', 0o600))
    const { totalPages } = await db.backup(partial, {
      progress: ({ totalPages: total, remainingPages }) => {
        onProgress(total - remainingPages, total)
        return PAGES_PER_STEP
      },
    })
    db.exec('COMMIT')
    checkCopy(partial)
    // link(2), unlike rename(2), fails (EEXIST) when anything, a dangling symlink too, is at destination.
    fs.linkSync(partial, destination)
    fs.unlinkSync(partial)
    syncPath(path.dirname(destination), 'r')
    return { pages: totalPages, bytes: fs.statSync(destination).size }
  } catch (error) {
    fs.rmSync(partial, { force: true })
    throw error
  } finally {
    db.close()
  }
}

/** Syncs the copy and runs SQLite's quick check on it; a copy that fails it is not kept. */
function checkCopy(file: string): void {
  const copy = new Database(file, { fileMustExist: true })
  try {
    const result = copy.pragma('quick_check', { simple: true })
    if (result !== 'ok') throw new Error(`the copy failed PRAGMA quick_check: ${String(result)}`)
  } finally {
    copy.close()
  }
  syncPath(file, 'r+')
}

/** fsync(2) of a file (`r+`) or of a folder (`r`), which makes a rename or link in it durable. */
export function syncPath(target: string, flags: 'r' | 'r+'): void {
  const fd = fs.openSync(target, flags)
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}
