import { Worker } from 'node:worker_threads'
import type { CheckpointMode, FromCheckpointer, ToCheckpointer } from './checkpoint-thread.js'
import type { SqliteOptions } from './database.js'

export type CheckpointerOptions = Pick<SqliteOptions, 'path' | 'synchronous' | 'coalesceWalWrites'>

/** A checkpoint SQLite failed; `code` is SQLite's (SQLITE_IOERR_FSYNC, say). */
export class CheckpointFailure extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message)
  }
}

/** The thread holds one connection and no data: a small heap is plenty. */
const HEAP_LIMITS = { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 32 }

export interface CheckpointResult {
  /** Frames in the WAL when the checkpoint ran. */
  log: number
  /** Frames of them now copied into the database file; equal to `log` when it caught up. */
  checkpointed: number
}

/**
 * The main thread's handle on the checkpointer thread (`checkpoint-thread.ts`). One checkpoint
 * runs at a time; a thread that dies is replaced by the next request, and the checkpoint it was
 * running is reported as failed (the WAL then simply waits for the next one).
 */
export class Checkpointer {
  private worker: Worker | undefined
  private current: { resolve: (r: CheckpointResult) => void; reject: (e: Error) => void } | undefined
  private closed = false

  constructor(private readonly options: CheckpointerOptions) {}

  get running(): boolean {
    return this.current !== undefined
  }

  /** Runs one checkpoint; at most one at a time. */
  checkpoint(mode: CheckpointMode): Promise<CheckpointResult> {
    if (this.closed) return Promise.reject(new Error('the checkpointer is closed'))
    if (this.current) return Promise.reject(new Error('a checkpoint is already running'))
    return new Promise((resolve, reject) => {
      this.current = { resolve, reject }
      const worker = this.thread()
      worker.ref()
      worker.postMessage({ op: 'checkpoint', mode } satisfies ToCheckpointer)
    })
  }

  /** Stops the thread once the checkpoint running (if any) is done. */
  async close(): Promise<void> {
    this.closed = true
    const worker = this.worker
    if (!worker) return
    worker.ref()
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
    worker.postMessage({ op: 'close' } satisfies ToCheckpointer)
    await exited
  }

  private settle(outcome: { result: CheckpointResult } | { error: Error }): void {
    const current = this.current
    this.current = undefined
    // Referenced only while a checkpoint runs: an idle checkpointer never keeps the process up.
    this.worker?.unref()
    if (!current) return
    if ('result' in outcome) current.resolve(outcome.result)
    else current.reject(outcome.error)
  }

  private thread(): Worker {
    if (this.worker) return this.worker
    const worker = new Worker(new URL('./checkpoint-thread.js', import.meta.url), {
      workerData: this.options,
      resourceLimits: HEAP_LIMITS,
    })
    worker.on('message', (message: FromCheckpointer) => {
      if (message.type === 'done') this.settle({ result: message })
      else if (message.type === 'failed')
        this.settle({ error: new CheckpointFailure(`checkpoint failed: ${message.message}`, message.code) })
    })
    let failure: Error | undefined
    worker.on('error', (error) => {
      failure = error
    })
    worker.once('exit', (code) => {
      if (this.worker === worker) this.worker = undefined
      const reason = failure?.message ?? `thread exited with code ${code}`
      this.settle({ error: new Error(`the checkpointer stopped: ${reason}`) })
    })
    this.worker = worker
    return worker
  }
}
