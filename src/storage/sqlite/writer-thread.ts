/**
 * The writer thread: owns the store's write connection and runs each batch the group-commit
 * writer (`group-commit.ts`) sends as one transaction, whose COMMIT SQLite syncs. Its syncs and
 * checkpoints block this thread, never the event loop that serves HTTP.
 */
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

export type ToWriter = { op: 'batch'; writes: WriteOp[] } | { op: 'close' }

export type FromWriter =
  /** BEGIN failed: another connection holds the write lock (or the file refused the write). */
  | { type: 'not-begun'; error: WireError }
  /** The whole batch was rolled back. */
  | { type: 'failed'; error: WireError }
  /** Rolled back before COMMIT: a store file has left its path. */
  | { type: 'moved'; file: string }
  /** Committed; `moved` when a store file left its path during the COMMIT itself. */
  | { type: 'committed'; wrote: boolean; outcomes: WireOutcome[]; moved?: string }

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
  }

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
      return { type: 'committed', wrote, outcomes, moved: wrote ? firstMissing(files) : undefined }
    } catch (error) {
      if (db.inTransaction) control.rollback.run()
      return { type: 'failed', error: wire(error) }
    }
  }

  port.on('message', (message: ToWriter) => {
    if (message.op === 'close') {
      db.close()
      port.close()
      return
    }
    port.postMessage(run(message.writes))
  })
}

if (parentPort) serve(parentPort, workerData as WriterThreadData)
