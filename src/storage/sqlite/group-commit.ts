/**
 * Group commit for the SQLite store, on the main thread: every write that has arrived by the time
 * a batch starts shares one transaction, and SQLite syncs the WAL once for all of them inside
 * COMMIT (`synchronous = FULL`; at `NORMAL` it syncs at checkpoints only). Every request of a
 * batch is answered after COMMIT returned, so after the sync; SQLite makes a commit visible to
 * readers, in any process, only after that sync. The sync runs on the event loop: measured, a
 * writer thread did not pay for its messages (docs/durability.md).
 */
import type Database from 'better-sqlite3'
import { StoreReadOnlyError, StoreUnavailableError, StoreWriteError } from '../storage.js'
import {
  DEFAULT_BUSY_TIMEOUT_MS,
  DEFAULT_MAX_BATCH,
  openSqliteDatabase,
  type SqliteOptions,
} from './database.js'
import type { StoreFiles } from './store-files.js'
import { prepareWriteOps, type WriteOp } from './write-ops.js'

/** Counters of the writer since this store was opened, for tests and operators. */
export interface WriterStats {
  /** Transactions begun (one per batch). */
  batchesStarted: number
  batchesCommitted: number
  /** Batches rolled back; every request in them was answered with the error. */
  batchesFailed: number
  /** Requests in committed batches. */
  requestsCommitted: number
  largestBatch: number
  /** Writes accepted and waiting for a batch (not counting the batch running now). */
  queued: number
}

/** Pauses between tries of a BEGIN that another process's write lock refused. */
const LOCK_RETRY_MS = [1, 2, 5, 10, 20, 50] as const

interface Queued {
  op: WriteOp
  resolve: (value: unknown) => void
  reject: (error: Error) => void
  /** When it was accepted (Date.now()): it waits for another process's lock at most busyTimeoutMs from here. */
  since: number
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: Error }

/**
 * How long /readyz reports a write that failed for a reason of the disk's: the Retry-After a
 * client of the failed write was given.
 */
const TROUBLE_SHOWN_MS = 5000

const sqliteCode = (error: unknown): string => {
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' ? code : ''
}

/** Another connection holds the lock SQLite needed. */
const isBusy = (error: unknown) => sqliteCode(error).startsWith('SQLITE_BUSY')

/**
 * What the client of a failed write hears. A held lock, a full disk, an I/O error or a file this
 * process may not write is the store's state, not a bug: a 503 to retry (a full disk answered
 * 500 INTERNAL). Any other error keeps its class and code.
 */
function storeError(error: unknown): Error {
  const code = sqliteCode(error)
  const message = (error as Error).message
  if (code.startsWith('SQLITE_BUSY')) return new StoreUnavailableError(`SQLite is busy: ${message}`)
  if (code.startsWith('SQLITE_READONLY')) {
    return new StoreReadOnlyError(`the SQLite store takes no writes: ${message}`, { cause: error })
  }
  if (code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR')) {
    return new StoreWriteError(`the SQLite store could not be written: ${message}`, { cause: error })
  }
  return error instanceof Error ? error : new Error(String(error))
}

/** Whether a failed write says something about the store's disk, which /readyz should show. */
const isDiskTrouble = (error: Error) =>
  error instanceof StoreWriteError || error instanceof StoreReadOnlyError

/**
 * An I/O error from SQLite while it wrote or synced the store. After a failed sync the kernel may
 * have dropped pages it then forgets about (a later sync can succeed without them), so nothing
 * written since the last good sync can be vouched for: the writer takes no more writes.
 */
const isIoError = (error: unknown) => sqliteCode(error).startsWith('SQLITE_IOERR')

export class GroupCommitWriter {
  private readonly db: Database.Database
  private readonly ops
  private readonly control
  private readonly maxBatch: number
  private readonly busyTimeoutMs: number
  private readonly counters: WriterStats = {
    batchesStarted: 0,
    batchesCommitted: 0,
    batchesFailed: 0,
    requestsCommitted: 0,
    largestBatch: 0,
    queued: 0,
  }
  private queue: Queued[] = []
  private scheduled = false
  /** A batch is between BEGIN (or waiting for the lock) and its answers. */
  private active = false
  /** Set once the store failed for good (a failed sync, files moved away): writes are refused. */
  private broken: StoreUnavailableError | undefined
  /** The last write that failed for the disk's sake (full, read-only), until one succeeds. */
  private trouble: { error: Error; at: number } | undefined
  private closing: Promise<void> | undefined
  private drained: (() => void) | undefined

  /**
   * `files` are the store's files as this process opened them; `onBroken` hears, once, why the
   * writer stopped taking writes.
   */
  constructor(
    options: SqliteOptions,
    private readonly files: StoreFiles,
    private readonly onBroken: (error: StoreUnavailableError) => void,
  ) {
    this.maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH
    this.busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS
    this.db = openSqliteDatabase(options, 'writer')
    this.ops = prepareWriteOps(this.db)
    const db = this.db
    this.control = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT op'),
      release: db.prepare('RELEASE op'),
      rollbackTo: db.prepare('ROLLBACK TO op'),
      totalChanges: db.prepare('SELECT total_changes()').pluck(),
    }
  }

  /** Runs one write in the next group commit; resolves with its result once it is committed. */
  write<T>(op: WriteOp): Promise<T> {
    const refused = this.refusal()
    if (refused) return Promise.reject(refused)
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ op, resolve: resolve as (value: unknown) => void, reject, since: Date.now() })
      this.schedule()
    })
  }

  /**
   * Throws why writes are refused, or why the last one failed, if that was a disk's reason and
   * recent; for /readyz. It also looks for store files moved away while no write came.
   */
  check(): void {
    const refused = this.refusal()
    if (refused) throw refused
    if (this.trouble && Date.now() - this.trouble.at < TROUBLE_SHOWN_MS) throw this.trouble.error
    const missing = this.files.missing()
    // The next write breaks the writer; until one comes, this tells the balancer.
    if (missing !== undefined) throw new StoreUnavailableError(movedAway(missing))
  }

  stats(): WriterStats {
    return { ...this.counters, queued: this.queue.length }
  }

  /** Finishes every write already accepted, then closes the connection; later writes are refused. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.active || this.queue.length > 0) await new Promise<void>((resolve) => (this.drained = resolve))
      this.db.close()
    })()
    return this.closing
  }

  private refusal(): Error | undefined {
    if (this.broken) return this.broken
    if (this.closing) return new Error('the SQLite store is closed')
    return undefined
  }

  private schedule(): void {
    if (this.scheduled || this.active || this.queue.length === 0) return
    this.scheduled = true
    // One batch per turn of the event loop: everything that arrived in this turn's I/O joins it.
    setImmediate(() => {
      this.scheduled = false
      this.startBatch()
    })
  }

  private startBatch(): void {
    if (this.active || this.queue.length === 0) return
    const batch = this.queue.splice(0, this.maxBatch)
    this.active = true
    this.counters.batchesStarted++
    this.begin(batch, 0)
  }

  /**
   * BEGIN IMMEDIATE, retried on timers while another process holds the write lock. Each write
   * waits at most busyTimeoutMs from when it was accepted, however many batches wait before it;
   * those past their time are failed and the rest go on waiting.
   */
  private begin(batch: Queued[], tries: number): void {
    try {
      this.control.begin.run()
    } catch (error) {
      const now = Date.now()
      const late = isBusy(error)
        ? batch.filter((request) => now - request.since >= this.busyTimeoutMs)
        : batch
      if (late.length === batch.length) return this.fail(batch, error)
      if (late.length > 0) {
        const failure = storeError(error)
        for (const request of late) request.reject(failure)
        batch = batch.filter((request) => now - request.since < this.busyTimeoutMs)
      }
      const pause = LOCK_RETRY_MS[Math.min(tries, LOCK_RETRY_MS.length - 1)]
      setTimeout(() => this.begin(batch, tries + 1), pause)
      return
    }
    this.runAndCommit(batch)
  }

  /**
   * A create that fails fails its whole batch (the rule the HTTP contract relies on). Any other
   * write runs under a savepoint, so its own expected failure (a duplicate token id, say) is
   * answered to it alone and does not take unrelated creates down with it.
   */
  private runAndCommit(batch: Queued[]): void {
    const { control, db } = this
    const outcomes: Outcome[] = []
    let wrote: boolean
    try {
      const changesBefore = control.totalChanges.get()
      this.ops.forget()
      for (const { op } of batch) {
        if (op.op === 'createPlant') {
          outcomes.push({ ok: true, value: this.ops.execute(op) })
          continue
        }
        control.savepoint.run()
        try {
          outcomes.push({ ok: true, value: this.ops.execute(op) })
          control.release.run()
        } catch (error) {
          // SQLite rolls the whole transaction back itself after full-disk errors; an I/O error
          // breaks the writer whatever SQLite kept.
          if (!db.inTransaction || isIoError(error)) throw error
          control.rollbackTo.run()
          control.release.run()
          outcomes.push({ ok: false, error: storeError(error) })
        }
      }
      wrote = control.totalChanges.get() !== changesBefore
      // A store file that has left its path would take this commit where no restart finds it, or
      // half of it: refused before COMMIT, its 503 means nothing stored.
      const missing = wrote ? this.files.missing() : undefined
      if (missing !== undefined) {
        control.rollback.run()
        this.broke(new StoreUnavailableError(movedAway(missing)), batch)
        return
      }
      control.commit.run()
    } catch (error) {
      if (db.inTransaction) control.rollback.run()
      this.fail(batch, error)
      return
    }
    if (wrote) this.trouble = undefined
    this.counters.batchesCommitted++
    this.counters.requestsCommitted += batch.length
    this.counters.largestBatch = Math.max(this.counters.largestBatch, batch.length)
    // A move during the COMMIT itself: its answers would vouch for files no restart opens.
    const missing = wrote ? this.files.missing() : undefined
    if (missing !== undefined) return this.broke(new StoreUnavailableError(movedAway(missing)), batch)
    this.answer(batch, outcomes)
  }

  private answer(batch: Queued[], outcomes: Outcome[]): void {
    for (const [i, request] of batch.entries()) {
      const outcome = outcomes[i] as Outcome
      if (outcome.ok) request.resolve(outcome.value)
      else request.reject(outcome.error)
    }
    this.batchDone()
  }

  /** An I/O error breaks the writer; any other error fails this batch alone. */
  private fail(batch: Queued[], error: unknown): void {
    if (isIoError(error)) {
      const cause = error as Error
      const broken = new StoreUnavailableError(
        `the SQLite store could not be written or synced (${cause.message}); it takes no more writes until the service restarts`,
        { cause },
      )
      return this.broke(broken, batch)
    }
    const failure = storeError(error)
    if (isDiskTrouble(failure)) this.trouble = { error: failure, at: Date.now() }
    this.counters.batchesFailed++
    for (const request of batch) request.reject(failure)
    this.batchDone()
  }

  /**
   * The store failed for good: the batch and every write queued behind it hear `error` (a 503:
   * not acknowledged, may or may not be stored), and so does every later write.
   */
  private broke(error: StoreUnavailableError, batch: Queued[]): void {
    const first = this.broken === undefined
    this.broken ??= error
    const waiting = this.queue
    this.queue = []
    this.counters.batchesFailed++
    for (const request of [...batch, ...waiting]) request.reject(this.broken)
    if (first) this.onBroken(this.broken)
    this.batchDone()
  }

  private batchDone(): void {
    this.active = false
    if (this.queue.length === 0 && this.drained) this.drained()
    this.schedule()
  }
}

const movedAway = (file: string) =>
  `the SQLite store file ${file} was deleted or replaced while the service ran; nothing written since is kept at PLANT_STORE_DB; restart the service`
