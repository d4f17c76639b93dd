/**
 * The checkpointer thread: copies the WAL into the database file when the writer asks, so that
 * neither the copy nor its fsyncs ever run on the event loop. PASSIVE checkpoints take no lock a
 * writer or reader waits for; each answers how far it got.
 */
import { parentPort, workerData } from 'node:worker_threads'
import type { CheckpointerOptions } from './checkpointer.js'
import { openSqliteDatabase } from './database.js'
import { addWalFunctions } from './wal-coalescing.js'

/**
 * Main → checkpointer. PASSIVE copies what it can while writes go on; RESTART, asked while the
 * writer holds its writes, also waits (briefly) for readers, so that the next transaction starts
 * the WAL over.
 */
export type CheckpointMode = 'PASSIVE' | 'RESTART'
export type ToCheckpointer = { op: 'checkpoint'; mode: CheckpointMode } | { op: 'close' }

/** How long a RESTART checkpoint waits for readers (of other processes) before it gives up. */
const RESTART_WAIT_MS = 20

/** Checkpointer → main: `log` frames in the WAL, `checkpointed` of them now in the database file. */
export type FromCheckpointer =
  { type: 'done'; log: number; checkpointed: number } | { type: 'failed'; message: string; code?: string }

function serve(port: NonNullable<typeof parentPort>, options: CheckpointerOptions): void {
  const post = (message: FromCheckpointer) => port.postMessage(message)
  const db = openSqliteDatabase({ ...options, busyTimeoutMs: RESTART_WAIT_MS }, 'checkpointer')
  // SQLite syncs the database file after a checkpoint only if no commit landed while it copied;
  // under steady writes the copied pages would wait for the RESTART, inside the writes' hold.
  const syncDatabaseFile = addWalFunctions(db, options.coalesceWalWrites ?? true)
    ? db.prepare('SELECT sync_database_file()')
    : undefined
  type Result = { log: number; checkpointed: number }
  port.on('message', (message: ToCheckpointer) => {
    if (message.op === 'close') {
      db.close()
      port.close()
      return
    }
    try {
      const [row] = db.pragma(`wal_checkpoint(${message.mode})`) as Result[]
      if (message.mode === 'PASSIVE') syncDatabaseFile?.get()
      post({ type: 'done', log: row?.log ?? 0, checkpointed: row?.checkpointed ?? 0 })
    } catch (error) {
      const code = (error as { code?: unknown }).code
      post({
        type: 'failed',
        message: error instanceof Error ? error.message : String(error),
        code: typeof code === 'string' ? code : undefined,
      })
    }
  })
}

if (parentPort) serve(parentPort, workerData as CheckpointerOptions)
