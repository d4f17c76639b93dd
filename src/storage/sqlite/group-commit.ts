/**
 * Group commit for the SQLite store, on the main thread: every write that has arrived by the time
 * a batch starts shares one transaction, and the WAL is then synced once for all of them on
 * libuv's thread pool, so the event loop goes on serving while the disk syncs. Every request of
 * a batch is answered only after that sync (power-loss durability, `synchronous: 'full'`), or
 * right after COMMIT in `normal` mode (crash durability: the WAL is in the OS's page cache).
 *
 * Why not SQLite's own `synchronous = FULL`: its fsync runs inside COMMIT, which would block the
 * event loop, and running the whole writer in a worker thread cost more CPU per create (structured
 * clones and thread wake-ups both ways, on a core the HTTP work shares) than the writes themselves.
 * Here SQLite never syncs the writer's connection; what makes that safe:
 * - a request is answered only after fdatasync of the WAL returned, which covers every frame of
 *   its transaction and of all before it (frames are checksummed in a chain, so recovery never
 *   replays part of a transaction);
 * - checkpoints never run on this connection: the checkpointer thread runs them with the store's
 *   level, which syncs the WAL before copying and the database file before the WAL is reused;
 * - the read connection is held on the last durable snapshot while a commit awaits its sync, so a
 *   read never shows a plant whose create has not been answered (`durable-snapshot.ts`);
 * - the directory is synced once the WAL exists, so the file itself survives a power cut.
 */
import fs from 'node:fs'
import path from 'node:path'
import type Database from 'better-sqlite3'
import { StoreReadOnlyError, StoreUnavailableError, StoreWriteError } from '../storage.js'
import {
  DEFAULT_BUSY_TIMEOUT_MS,
  DEFAULT_MAX_BATCH,
  openSqliteDatabase,
  type SqliteOptions,
} from './database.js'
import { CommitDiscarder, describeOutcome } from './commit-discarder.js'
import { StoreFiles } from './store-files.js'
import { WalRecycler } from './wal-recycler.js'
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
  /** Checkpoints the checkpointer thread finished. */
  checkpoints: number
  /** Writes accepted and waiting for a batch (not counting the batch running now). */
  queued: number
}

/** Keeps the read connection on durable data: `hold` before a commit, `release` once synced. */
export interface SnapshotHold {
  hold(): void
  release(): void
  /** The writer broke: what it committed since the hold may not be on disk, and stays unshown. */
  freeze(): void
  /** Ends the hold and makes reads wait: a commit is being taken back (see syncFailed). */
  suspend(): void
  /** Reads go on, on the newest snapshot. */
  resume(): void
}

/** How the WAL is synced; a test replaces it to make a sync fail. */
export type SyncFile = (fd: number, done: (error: NodeJS.ErrnoException | null) => void) => void

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

export class GroupCommitWriter {
  private readonly db: Database.Database
  private readonly ops
  private readonly control
  private readonly walFd: number | undefined
  /** Takes back a commit whose WAL sync failed (only with `synchronous: 'full'`, which syncs). */
  private readonly discarder: CommitDiscarder | undefined
  private readonly recycler: WalRecycler
  private readonly maxBatch: number
  private readonly busyTimeoutMs: number
  private readonly observer: SqliteOptions['observer']
  private readonly counters: Omit<WriterStats, 'queued' | 'checkpoints'> = {
    batchesStarted: 0,
    batchesCommitted: 0,
    batchesFailed: 0,
    requestsCommitted: 0,
    largestBatch: 0,
  }
  private queue: Queued[] = []
  private scheduled = false
  /** A batch is between BEGIN (or waiting for the lock) and its answers. */
  private active = false
  /** Set once a sync failed: what was committed since may not be on disk, so nothing is trusted. */
  private broken: StoreUnavailableError | undefined
  /**
   * `PRAGMA data_version` of this connection when its last successful WAL sync began: every commit
   * another connection (another process on the file) had made by then is on disk.
   */
  private syncedOthersVersion: number | undefined
  /** The last write that failed for the disk's sake (full, I/O error, read-only), until one succeeds. */
  private trouble: { error: Error; at: number } | undefined
  private readonly files: StoreFiles
  private closing: Promise<void> | undefined
  private drained: (() => void) | undefined
  /** Metrics only: when the running batch began (performance.now()). */
  private batchStartedAt = 0

  constructor(
    options: SqliteOptions,
    private readonly snapshot: SnapshotHold,
    private readonly syncFile: SyncFile = fs.fdatasync,
  ) {
    this.observer = options.observer
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
      dataVersion: db.prepare('PRAGMA data_version').pluck(),
      // Rewrites page 1 with the value it has (the service never sets user_version): a commit
      // that changes no row, for answersFromOthers.
      emptyCommit: db.prepare('PRAGMA user_version = 0'),
    }
    // Reading the schema makes SQLite create the WAL (and the shared memory) if they do not exist yet.
    db.prepare('SELECT count(*) FROM sqlite_schema').get()
    if (options.synchronous === 'full') {
      this.walFd = openWal(options.path)
      // What other processes on the file committed before this one opened is on disk from here.
      this.syncedOthersVersion = this.control.dataVersion.get() as number
      fs.fdatasyncSync(this.walFd)
      this.discarder = new CommitDiscarder(db, `${options.path}-wal`, options.coalesceWalWrites ?? true)
    }
    this.files = new StoreFiles(options.path)
    this.recycler = new WalRecycler(options, {
      batchActive: () => this.active,
      stopped: () => this.closing !== undefined || this.broken !== undefined,
      resume: () => this.schedule(),
      databaseFileFailed: (error) =>
        this.broke(`the SQLite database file could not be written or synced by a checkpoint`, error, []),
    })
  }

  /** Runs one write in the next group commit; resolves with its result once it is durable. */
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
    // The next write breaks the writer (checkFiles); until one comes, this tells the balancer.
    if (missing !== undefined) throw new StoreUnavailableError(movedAway(missing))
  }

  /** SQLite's `data_version` on this connection: it moves whenever another connection commits. */
  othersVersion(): number {
    return this.control.dataVersion.get() as number
  }

  stats(): WriterStats {
    return { ...this.counters, checkpoints: this.recycler.checkpoints, queued: this.queue.length }
  }

  /**
   * Finishes every write already accepted, then closes the connection; later writes are refused.
   * The connection is switched to FULL first: were it the last one on the file, closing would
   * checkpoint, and that checkpoint must sync.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.active || this.queue.length > 0) await new Promise<void>((resolve) => (this.drained = resolve))
      this.db.pragma('synchronous = FULL')
      this.db.close()
      if (this.walFd !== undefined) fs.closeSync(this.walFd)
      this.files.close()
      await this.recycler.close()
    })()
    return this.closing
  }

  private refusal(): Error | undefined {
    if (this.broken) return this.broken
    if (this.closing) return new Error('the SQLite store is closed')
    return undefined
  }

  private schedule(): void {
    if (this.scheduled || this.active || this.recycler.holdsWrites || this.queue.length === 0) return
    this.scheduled = true
    // One batch per turn of the event loop: everything that arrived in this turn's I/O joins it.
    setImmediate(() => {
      this.scheduled = false
      this.startBatch()
    })
  }

  private startBatch(): void {
    if (this.active || this.recycler.holdsWrites || this.queue.length === 0) return
    const batch = this.queue.splice(0, this.maxBatch)
    this.active = true
    this.batchStartedAt = performance.now()
    this.counters.batchesStarted++
    this.begin(batch, 0)
  }

  /**
   * BEGIN IMMEDIATE, retried on timers while another process holds the write lock. Each write
   * waits at most busyTimeoutMs from when it was accepted: timed per batch, a write queued behind
   * batches that each waited their own 5 s got its 503 after 10 to 25 s (an audit with the lock
   * held from outside). Those past their time are failed and the rest go on waiting.
   */
  private begin(batch: Queued[], tries: number): void {
    try {
      this.control.begin.run()
    } catch (error) {
      const now = Date.now()
      const late = isBusy(error)
        ? batch.filter((request) => now - request.since >= this.busyTimeoutMs)
        : batch
      if (late.length === batch.length) return this.fail(batch, storeError(error))
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
    let wrote = true
    let othersVersion = 0
    try {
      // Read inside the transaction: the snapshot this batch's replays and conflicts are read from.
      if (this.walFd !== undefined) othersVersion = control.dataVersion.get() as number
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
          // SQLite rolls the whole transaction back itself after I/O or full-disk errors.
          if (!db.inTransaction) throw error
          control.rollbackTo.run()
          control.release.run()
          outcomes.push({ ok: false, error: storeError(error) })
        }
      }
      // A batch that changed no row (the webhook worker's poll when nothing is due, once a second)
      // commits no WAL frame: there is nothing to sync, and an idle service made no fsync at all.
      wrote = control.totalChanges.get() !== changesBefore
      if (!wrote && this.answersFromOthers(othersVersion)) {
        control.emptyCommit.run()
        wrote = true
      }
      // A store file that has left its path would take this commit where no restart finds it, or
      // half of it: refused before COMMIT, its 503 means nothing stored (an audit found a create
      // answered 503 there after a restart). checkFiles catches a move during the commit itself.
      const missing = wrote ? this.files.missing() : undefined
      if (missing !== undefined) {
        control.rollback.run()
        this.broke('a store file has left its path', new Error(movedAway(missing)), batch)
        return
      }
      if (this.walFd !== undefined && wrote) this.snapshot.hold()
      control.commit.run()
    } catch (error) {
      if (db.inTransaction) control.rollback.run()
      if (this.walFd !== undefined && wrote) this.snapshot.release()
      this.fail(batch, storeError(error))
      return
    }
    if (wrote) this.trouble = undefined
    this.counters.batchesCommitted++
    this.counters.requestsCommitted += batch.length
    this.counters.largestBatch = Math.max(this.counters.largestBatch, batch.length)
    if (!wrote) {
      this.answer(batch, outcomes)
      return
    }
    if (this.walFd === undefined) {
      if (this.checkFiles(batch)) this.answer(batch, outcomes)
      return
    }
    this.syncFile(this.walFd, (error) => {
      if (error) {
        this.syncFailed(batch, error)
        return
      }
      this.syncedOthersVersion = othersVersion
      if (!this.checkFiles(batch)) return
      this.snapshot.release()
      this.answer(batch, outcomes)
    })
  }

  /**
   * A batch that wrote nothing may still answer from another process's commit: a replay's 200, a
   * conflict's 409 or a delete's 404 for a plant that process created or deleted and has not
   * synced yet. Were that commit then lost (a power cut, or its own sync failing and the commit
   * being taken back), the answer would vouch for something that is not so; two audits found
   * exactly that with two processes on one file. So when another connection has committed since
   * this writer's last sync, the batch commits anyway (`emptyCommit`) and is synced like any
   * other: the sync covers the other process's frames too (one file), and a commit after theirs
   * means theirs can no longer be taken back (commit-discarder.ts), whatever its own sync does.
   */
  private answersFromOthers(othersVersion: number): boolean {
    return this.walFd !== undefined && othersVersion !== this.syncedOthersVersion
  }

  /** False, with the writer broken and `batch` failed, when a store file has left its path. */
  private checkFiles(batch: Queued[]): boolean {
    const missing = this.files.missing()
    if (missing === undefined) return true
    this.broke('a store file has left its path', new Error(movedAway(missing)), batch)
    return false
  }

  private answer(batch: Queued[], outcomes: Outcome[]): void {
    for (const [i, request] of batch.entries()) {
      const outcome = outcomes[i] as Outcome
      if (outcome.ok) request.resolve(outcome.value)
      else request.reject(outcome.error)
    }
    this.observer?.batchCommitted(batch.length, performance.now() - this.batchStartedAt)
    this.batchDone()
  }

  private fail(batch: Queued[], error: Error): void {
    if (isDiskTrouble(error)) this.trouble = { error, at: Date.now() }
    this.counters.batchesFailed++
    for (const request of batch) request.reject(error)
    this.batchDone()
  }

  /**
   * A failed fsync may have dropped pages the kernel then forgets about (a later fsync can
   * succeed without them), so nothing committed since the last good sync can be vouched for: the
   * store refuses writes until the process restarts and SQLite recovers the WAL from the disk.
   */
  private broke(what: string, error: Error, batch: Queued[]): void {
    const refused = this.refuseWrites(what, error)
    // The read connection stays on the last snapshot known to be durable.
    this.snapshot.freeze()
    this.fail(batch, refused)
  }

  /**
   * The batch's commit is in the WAL but not known to be on disk, and its requests are about to
   * hear 503: it is discarded first, so that neither a restart nor a checkpoint keeps it. Writes
   * are refused from now on; those queued behind it were never run and hear so at once.
   */
  private syncFailed(batch: Queued[], error: Error): void {
    const what = 'the SQLite WAL could not be synced'
    if (!this.discarder) return this.broke(what, error, batch)
    this.refuseWrites(what, error)
    // Reads wait until it is done, then show what is there: without the commit once discarded,
    // with it otherwise, as a restart would.
    this.snapshot.suspend()
    this.discarder.discardLast((outcome) => {
      this.snapshot.resume()
      this.fail(batch, this.refuseWrites(`${what}; ${describeOutcome(outcome)}`, error))
    })
  }

  private refuseWrites(what: string, error: Error): StoreUnavailableError {
    this.broken = new StoreUnavailableError(`${what} (${error.message}); restart the service to recover`, {
      cause: error,
    })
    const waiting = this.queue
    this.queue = []
    for (const request of waiting) request.reject(this.broken)
    return this.broken
  }

  private batchDone(): void {
    this.active = false
    this.recycler.batchDone()
    if (this.queue.length === 0 && this.drained) this.drained()
    this.schedule()
  }
}

const movedAway = (file: string) =>
  `the SQLite store file ${file} was deleted or replaced while the service ran; nothing written since is kept at PLANT_STORE_DB`

/**
 * Opens the WAL for the writer's own fdatasync calls. Syncing the folder makes that file's name
 * durable, which SQLite would have done on its first sync of it.
 */
function openWal(file: string): number {
  const fd = fs.openSync(`${file}-wal`, 'r+')
  const folder = fs.openSync(path.dirname(file), 'r')
  try {
    fs.fsyncSync(folder)
  } finally {
    fs.closeSync(folder)
  }
  return fd
}
