/**
 * Group commit for the SQLite store: every write that has arrived by the time a batch starts
 * shares one transaction, which the writer thread (`writer-thread.ts`) runs and SQLite syncs
 * once inside COMMIT (`synchronous = FULL`; at `NORMAL` it syncs at checkpoints only). Every
 * request of a batch is answered after COMMIT returned, so after the sync; SQLite makes a commit
 * visible to readers, in any process, only after that sync. The thread keeps syncs and
 * checkpoints off the event loop, which measures half as many creates again a second (docs/durability.md).
 */
import { Worker } from 'node:worker_threads'
import { StoreStoppedError } from '../storage.js'
import { DEFAULT_BUSY_TIMEOUT_MS, DEFAULT_MAX_BATCH, type SqliteOptions } from './database.js'
import { isBusy, isDiskTrouble, isIoError, storeError } from './sqlite-errors.js'
import type { StoreFiles } from './store-files.js'
import type { WriteOp } from './write-ops.js'
import type { CheckpointOutcome, FromWriter, ToWriter, WireError, WriterThreadData } from './writer-thread.js'

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
  /** Checkpoints run after a commit left the WAL past the threshold. */
  checkpoints: number
  /** Of those, the ones a reader's snapshot kept from emptying the WAL (tried again after the next commit). */
  checkpointsBusy: number
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

/**
 * How long /readyz reports a write that failed for a reason of the disk's: the Retry-After a
 * client of the failed write was given.
 */
const TROUBLE_SHOWN_MS = 5000

/** An error from the writer thread, with the `code` that decides what the client hears. */
const unwire = (error: WireError) => Object.assign(new Error(error.message), { code: error.code })

/** The thread holds one connection and a batch at a time: a small heap is plenty. */
const HEAP_LIMITS = { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 64 }

export class GroupCommitWriter {
  private readonly thread: Worker
  private readonly threadExited: Promise<void>
  /** The batch the thread is running, and its tries so far. */
  private inFlight: { batch: Queued[]; tries: number } | undefined
  private readonly maxBatch: number
  private readonly busyTimeoutMs: number
  private readonly observer: SqliteOptions['observer']
  private readonly counters: WriterStats = {
    batchesStarted: 0,
    batchesCommitted: 0,
    batchesFailed: 0,
    requestsCommitted: 0,
    largestBatch: 0,
    queued: 0,
    checkpoints: 0,
    checkpointsBusy: 0,
  }
  private queue: Queued[] = []
  private scheduled = false
  /** A batch is between BEGIN (or waiting for the lock) and its answers. */
  private active = false
  /** Set once the store failed for good (a failed sync, files moved away): writes are refused. */
  private broken: StoreStoppedError | undefined
  /** A write, sync or checkpoint of the store failed: its WAL must reach the next start untouched. */
  private ioFailed = false
  /** Why the checkpoint before closing failed, if it did. */
  private closeError: StoreStoppedError | undefined
  /** The last write that failed for the disk's sake (full, read-only), until one succeeds. */
  private trouble: { error: Error; at: number } | undefined
  private closing: Promise<void> | undefined
  private drained: (() => void) | undefined
  /** Metrics only: when the running batch began (performance.now()). */
  private batchStartedAt = 0

  /**
   * `files` are the store's files as this process opened them; `onBroken` hears, once, why the
   * writer stopped taking writes.
   */
  constructor(
    options: SqliteOptions,
    private readonly files: StoreFiles,
    private readonly onBroken: (error: StoreStoppedError) => void,
  ) {
    this.observer = options.observer
    this.maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH
    this.busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS
    // Functions cannot cross to a thread; the listeners stay here, where they are called.
    const { observer: _observer, onMigration: _onMigration, ...threadOptions } = options
    const workerData: WriterThreadData = { options: threadOptions, files: files.identities }
    this.thread = new Worker(new URL('./writer-thread.js', import.meta.url), {
      workerData,
      resourceLimits: HEAP_LIMITS,
    })
    // Referenced only while a batch runs: an idle writer never keeps the process up.
    this.thread.unref()
    this.thread.on('message', (reply: FromWriter) => {
      if (reply.type === 'closed') {
        if (reply.error) this.closeError = checkpointFailed(unwire(reply.error))
        return
      }
      const { batch, tries } = this.inFlight as { batch: Queued[]; tries: number }
      this.inFlight = undefined
      this.thread.unref()
      this.settle(batch, tries, reply)
    })
    let failure: Error | undefined
    this.thread.on('error', (error) => (failure = error))
    this.threadExited = new Promise((resolve) => {
      this.thread.once('exit', (code) => {
        resolve()
        if (this.closing) return
        const why = failure?.message ?? `it exited with code ${code}`
        const error = new StoreStoppedError(
          `the SQLite writer thread stopped: ${why}; restart the service`,
          'its writer thread stopped',
        )
        if (this.inFlight) this.broke(error, this.inFlight.batch)
        else this.stopped(error)
      })
    })
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
    if (missing !== undefined) throw movedAway(missing)
  }

  stats(): WriterStats {
    return { ...this.counters, queued: this.queue.length }
  }

  /**
   * Whether the WAL must be left as it is for the next start to replay: after a failed sync or
   * checkpoint, a close's checkpoint whose sync seems to succeed could reset it over lost pages.
   */
  get keepsWal(): boolean {
    return this.ioFailed
  }

  /**
   * Finishes every write already accepted, checkpoints (unless the store failed), then closes the
   * thread's connection and waits for the thread to end; later writes are refused. Rejects when
   * that checkpoint failed: the store then counts as failed, and its WAL is left for the next start.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.active || this.queue.length > 0) await new Promise<void>((resolve) => (this.drained = resolve))
      this.thread.ref()
      this.thread.postMessage({ op: 'close', checkpoint: this.broken === undefined } satisfies ToWriter)
      await this.threadExited
      if (this.closeError) {
        this.ioFailed = true
        throw this.closeError
      }
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
    this.batchStartedAt = performance.now()
    this.counters.batchesStarted++
    this.run(batch, 0)
  }

  /** Sends the batch to the thread; its reply goes to `settle`. */
  private run(batch: Queued[], tries: number): void {
    this.thread.ref()
    this.inFlight = { batch, tries }
    this.thread.postMessage({ op: 'batch', writes: batch.map((request) => request.op) } satisfies ToWriter)
  }

  /**
   * A BEGIN that another process's write lock refused is tried again on timers. Each write waits
   * at most busyTimeoutMs from when it was accepted, however many batches wait before it; those
   * past their time are failed and the rest go on waiting.
   */
  private settle(batch: Queued[], tries: number, reply: Exclude<FromWriter, { type: 'closed' }>): void {
    if (reply.type === 'not-begun') {
      const error = unwire(reply.error)
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
      setTimeout(() => this.run(batch, tries + 1), pause)
      return
    }
    if (reply.type === 'failed') return this.fail(batch, unwire(reply.error))
    if (reply.type === 'moved') return this.broke(movedAway(reply.file), batch)
    if (reply.wrote) this.trouble = undefined
    this.counters.batchesCommitted++
    this.counters.requestsCommitted += batch.length
    this.counters.largestBatch = Math.max(this.counters.largestBatch, batch.length)
    // A move during the COMMIT itself: its answers would vouch for files no restart opens.
    if (reply.moved !== undefined) return this.broke(movedAway(reply.moved), batch)
    for (const [i, request] of batch.entries()) {
      const outcome = reply.outcomes[i]
      if (outcome?.ok) request.resolve(outcome.value)
      else request.reject(storeError(unwire(outcome?.error ?? { message: 'no outcome' })))
    }
    this.observer?.batchCommitted(batch.length, performance.now() - this.batchStartedAt)
    if (reply.checkpoint) this.checkpointed(reply.checkpoint)
    this.batchDone()
  }

  /**
   * This batch's COMMIT synced the WAL, so its answers stand; a checkpoint that failed to write or
   * sync the database file is a failed sync, and nothing after it is taken.
   */
  private checkpointed(outcome: CheckpointOutcome): void {
    this.counters.checkpoints++
    if (outcome.ok) {
      if (outcome.busy) this.counters.checkpointsBusy++
      return
    }
    this.ioFailed = true
    this.stopped(checkpointFailed(unwire(outcome.error)))
  }

  /** An I/O error breaks the writer; any other error fails this batch alone. */
  private fail(batch: Queued[], error: Error): void {
    if (isIoError(error)) {
      const broken = new StoreStoppedError(
        `the SQLite store could not be written or synced (${error.message}); it takes no more writes until the service restarts`,
        'a write or sync of its files failed',
        { cause: error },
      )
      this.ioFailed = true
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
  private broke(error: StoreStoppedError, batch: Queued[]): void {
    this.counters.batchesFailed++
    for (const request of batch) request.reject(error)
    this.stopped(error)
    this.batchDone()
  }

  /** Refuses every write from now on, those queued included; tells `onBroken` the first time. */
  private stopped(error: StoreStoppedError): void {
    const first = this.broken === undefined
    this.broken ??= error
    const waiting = this.queue
    this.queue = []
    for (const request of waiting) request.reject(this.broken)
    if (first) this.onBroken(this.broken)
  }

  private batchDone(): void {
    this.active = false
    if (this.queue.length === 0 && this.drained) this.drained()
    this.schedule()
  }
}

const movedAway = (file: string) =>
  new StoreStoppedError(
    `the SQLite store file ${file} was deleted or replaced while the service ran; nothing written since is kept at PLANT_STORE_DB; restart the service`,
    'its files were moved away',
  )

/** Any error of a checkpoint stops the store; an I/O error or a full disk is the expected one. */
const checkpointFailed = (error: Error) =>
  new StoreStoppedError(
    `a checkpoint of the SQLite WAL into the database file failed (${error.message}); the WAL keeps every commit, and the store takes no more writes until the service restarts`,
    'a checkpoint into its database file failed',
    { cause: error },
  )
