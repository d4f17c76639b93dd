/**
 * The writer thread: owns the store's write connection and runs each batch the group-commit
 * writer (`group-commit.ts`) sends as one transaction, whose COMMIT SQLite syncs, then checkpoints
 * the WAL when it has grown past the threshold. Its syncs and checkpoints block this thread, never
 * the event loop that serves HTTP.
 */
import fs from 'node:fs'
import { parentPort, workerData } from 'node:worker_threads'
import { openSqliteDatabase, type SqliteOptions } from './database.js'
import { isIoError } from './sqlite-errors.js'
import { type FileIdentity, firstMissing } from './store-files.js'
import { prepareWriteOps, type WriteOp } from './write-ops.js'

export interface WriterThreadData {
  options: SqliteOptions
  files: FileIdentity[]
}

/** An error as it crosses threads: a structured clone keeps neither its class nor its `code`. */
export interface WireError {
  message: string
  code?: string
}

export type WireOutcome = { ok: true; value: unknown } | { ok: false; error: WireError }

/**
 * `close` checkpoints first unless `checkpoint` is false (the store failed) or a file has left its
 * path: after a failed sync nothing may copy the WAL into the database file and reset it, and a
 * database file replaced meanwhile must not have the WAL it shares with its successor emptied.
 */
export type ToWriter = { op: 'batch'; writes: WriteOp[] } | { op: 'close'; checkpoint: boolean }

/** A checkpoint the thread ran: `busy` when a reader kept it from copying every frame and truncating the WAL. */
export type CheckpointOutcome = { ok: true; busy: boolean } | { ok: false; error: WireError }

export type FromWriter =
  /** BEGIN failed: another connection holds the write lock (or the file refused the write). */
  | { type: 'not-begun'; error: WireError }
  /** The whole batch was rolled back. */
  | { type: 'failed'; error: WireError }
  /** Rolled back before COMMIT: a store file has left its path. */
  | { type: 'moved'; file: string }
  /**
   * Committed; `moved` when a store file left its path during the COMMIT itself; `checkpoint`
   * when the WAL had passed the threshold and a checkpoint ran after the COMMIT.
   */
  | {
      type: 'committed'
      wrote: boolean
      outcomes: WireOutcome[]
      moved?: string
      checkpoint?: CheckpointOutcome
    }
  /** The connection is closed; `error` when the checkpoint before it failed. */
  | { type: 'closed'; error?: WireError }

/** SQLite's default auto-checkpoint threshold, in pages, which this thread applies itself. */
export const CHECKPOINT_PAGES = 1000

const wire = (error: unknown): WireError => {
  const code = (error as { code?: unknown }).code
  return {
    message: (error as Error).message ?? String(error),
    code: typeof code === 'string' ? code : undefined,
  }
}

function serve(port: NonNullable<typeof parentPort>, { options, files }: WriterThreadData): void {
  const db = openSqliteDatabase(options, 'writer')
  const ops = prepareWriteOps(db)
  const control = {
    begin: db.prepare('BEGIN IMMEDIATE'),
    commit: db.prepare('COMMIT'),
    rollback: db.prepare('ROLLBACK'),
    savepoint: db.prepare('SAVEPOINT op'),
    release: db.prepare('RELEASE op'),
    rollbackTo: db.prepare('ROLLBACK TO op'),
    totalChanges: db.prepare('SELECT total_changes()').pluck(),
    // TRUNCATE (RESTART, then the WAL cut to 0 bytes) so that the WAL's size is what it holds:
    // the trigger below and /readyz read the file's size. The busy timeout of 0 makes it a
    // PASSIVE one when a reader holds an old snapshot: it copies what it can and says busy.
    checkpoint: db.prepare('PRAGMA wal_checkpoint(TRUNCATE)'),
  }
  const wal = `${options.path}-wal`
  const walLimit = 32 + CHECKPOINT_PAGES * ((db.pragma('page_size', { simple: true }) as number) + 24)

  /**
   * SQLite's own auto-checkpoint (turned off in database.ts) runs after COMMIT and drops its
   * error: a database file whose writes or syncs failed went unnoticed while the WAL grew.
   */
  const checkpoint = (): CheckpointOutcome => {
    try {
      const { busy } = control.checkpoint.get() as { busy: number; log: number; checkpointed: number }
      return { ok: true, busy: busy !== 0 }
    } catch (error) {
      return { ok: false, error: wire(error) }
    }
  }
  const walSize = () => fs.statSync(wal, { throwIfNoEntry: false })?.size ?? 0

  /**
   * A create that fails fails its whole batch (the rule the HTTP contract relies on). Any other
   * write runs under a savepoint, so its own expected failure (a duplicate token id, say) is
   * answered to it alone and does not take unrelated creates down with it.
   */
  const run = (writes: WriteOp[]): FromWriter => {
    try {
      control.begin.run()
    } catch (error) {
      return { type: 'not-begun', error: wire(error) }
    }
    const outcomes: WireOutcome[] = []
    try {
      const changesBefore = control.totalChanges.get()
      ops.forget()
      for (const op of writes) {
        if (op.op === 'createPlant') {
          outcomes.push({ ok: true, value: ops.execute(op) })
          continue
        }
        control.savepoint.run()
        try {
          outcomes.push({ ok: true, value: ops.execute(op) })
          control.release.run()
        } catch (error) {
          // SQLite rolls the whole transaction back itself after full-disk errors; an I/O error
          // breaks the writer whatever SQLite kept.
          if (!db.inTransaction || isIoError(error)) throw error
          control.rollbackTo.run()
          control.release.run()
          outcomes.push({ ok: false, error: wire(error) })
        }
      }
      const wrote = control.totalChanges.get() !== changesBefore
      // A store file that has left its path would take this commit where no restart finds it, or
      // half of it: refused before COMMIT, its 503 means nothing stored.
      const moved = wrote ? firstMissing(files) : undefined
      if (moved !== undefined) {
        control.rollback.run()
        return { type: 'moved', file: moved }
      }
      control.commit.run()
      const committed: Extract<FromWriter, { type: 'committed' }> = {
        type: 'committed',
        wrote,
        outcomes,
        moved: wrote ? firstMissing(files) : undefined,
      }
      if (wrote && committed.moved === undefined && walSize() >= walLimit) committed.checkpoint = checkpoint()
      return committed
    } catch (error) {
      if (db.inTransaction) control.rollback.run()
      return { type: 'failed', error: wire(error) }
    }
  }

  port.on('message', (message: ToWriter) => {
    if (message.op === 'close') {
      const last = message.checkpoint && firstMissing(files) === undefined ? checkpoint() : undefined
      db.close()
      port.postMessage({
        type: 'closed',
        error: last?.ok === false ? last.error : undefined,
      } satisfies FromWriter)
      port.close()
      return
    }
    port.postMessage(run(message.writes))
  })
}

if (parentPort) serve(parentPort, workerData as WriterThreadData)
