import { Worker } from 'node:worker_threads'
import { StoreUnavailableError } from '../storage.js'
import type { SqliteOptions } from './database.js'
import {
  deserializeError,
  type FromWriter,
  newStatsBuffer,
  type ToWriter,
  readStats,
  statIndex,
  type WriteOp,
  type WriterData,
  type WriterStats,
} from './writer-protocol.js'

/**
 * The writer keeps no data of its own (rows live in SQLite's page cache), only the messages of a
 * batch or two; V8's default young generation of up to 48 MiB per thread would be RSS for nothing.
 * An old generation over its limit ends the thread, which the client reports as a 503 and
 * restarts, so the limit is far above anything a batch of 256 writes needs.
 */
const WRITER_HEAP_LIMITS = { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 64 }

/** After the writer thread dies, how long writes are refused before a new one is started. */
const RESTART_DELAY_MS = 1000

interface Pending {
  resolve: (value: unknown) => void
  reject: (error: Error) => void
}

interface Running {
  worker: Worker
  ready: Promise<void>
  exited: Promise<void>
  /** The last seq of each message posted to it and not fully answered yet, oldest first. */
  unanswered: number[]
}

/**
 * Messages the writer may hold at once: the one its current batch came from and the next.
 * Writes issued meanwhile wait here and travel together when a batch is answered, so a busy
 * writer costs the main thread about one postMessage per commit, not one per event-loop turn.
 */
const MAX_MESSAGES_IN_FLIGHT = 2

/**
 * The main thread's handle on the writer thread (`sqlite-writer.ts`): sends each write there and
 * settles its promise when the writer answers, which it does only after the batch holding the
 * write has committed (or failed as a whole).
 *
 * If the thread dies, every write it had not answered is rejected with StoreUnavailableError
 * (answered 503 with Retry-After). Whether such a write was stored is unknown, as with any lost
 * connection; a retried create is then replayed or created, never stored twice. Writes and
 * pings are refused for RESTART_DELAY_MS, so a store that cannot open does not spin, and the
 * next one after that starts a new thread.
 */
export class SqliteWriter {
  private readonly stats = newStatsBuffer()
  private readonly pending = new Map<number, Pending>()
  private running: Running | undefined
  private started = 0
  private seq = 0
  private diedAt = Number.NEGATIVE_INFINITY
  private lastDeath = ''
  private closing: Promise<void> | undefined
  /** Writes not yet posted, bound for `outboxTarget` as one message (see enqueue). */
  private outbox: ToWriter[] = []
  private outboxTarget: Running | undefined

  constructor(private readonly options: SqliteOptions) {}

  /** Starts the thread if none runs; resolves once it has opened the file. */
  start(): Promise<void> {
    try {
      return this.thread().ready
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** Runs one write in the next group commit; resolves with its result once committed. */
  write<T>(op: WriteOp): Promise<T> {
    let running: Running
    try {
      running = this.thread()
    } catch (error) {
      return Promise.reject(error)
    }
    const seq = ++this.seq
    return new Promise<T>((resolve, reject) => {
      // Referenced only while a write is outstanding: an idle writer never keeps the process up,
      // and a process never exits with a write in flight.
      if (this.pending.size === 0) running.worker.ref()
      this.pending.set(seq, { resolve: resolve as (value: unknown) => void, reject })
      this.enqueue(running, { ...op, seq })
    })
  }

  /**
   * postMessage costs the main thread 5-10 µs plus a structured clone each, so writes travel in
   * groups: those of one event-loop turn at least, and while the writer already holds
   * MAX_MESSAGES_IN_FLIGHT messages, everything until it answers a batch. The writer would have
   * put them in one commit anyway.
   */
  private enqueue(running: Running, message: ToWriter): void {
    if (this.outboxTarget !== running) this.flushOutbox(true)
    if (this.outbox.length === 0) setImmediate(() => this.flushOutbox())
    this.outboxTarget = running
    this.outbox.push(message)
  }

  private flushOutbox(force = false): void {
    const messages = this.outbox
    const target = this.outboxTarget
    if (messages.length === 0 || !target) return
    if (!force && target.unanswered.length >= MAX_MESSAGES_IN_FLIGHT) return
    this.outbox = []
    const last = messages.at(-1)
    if (last && 'seq' in last) target.unanswered.push(last.seq)
    target.worker.postMessage(messages)
  }

  /** Counters of the writer thread(s) since this store was opened. */
  counters(): WriterStats {
    return readStats(this.stats)
  }

  /**
   * Kills the thread at once, as a crash would, to test the failure path. Only while it is idle:
   * better-sqlite3 aborts the whole process when a thread is terminated inside a failing SQLite
   * call, which is also why close() never terminates it.
   */
  async terminate(): Promise<void> {
    await this.running?.worker.terminate()
  }

  /**
   * Lets the writer finish every write already sent, then stops it. Later writes are refused.
   * There is no deadline here: a write waits at most the busy timeout for a lock, and cutting a
   * commit short could abort the process (see terminate); the server's shutdown has its own.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const running = this.running
      if (!running) return
      running.worker.ref()
      this.flushOutbox(true)
      running.worker.postMessage({ op: 'close' })
      await running.exited
    })()
    return this.closing
  }

  private thread(): Running {
    if (this.closing) throw new Error('the SQLite store is closed')
    if (this.running) return this.running
    if (Date.now() - this.diedAt < RESTART_DELAY_MS)
      throw new StoreUnavailableError(`the SQLite writer stopped: ${this.lastDeath}`)
    if (this.started++ > 0) Atomics.add(new BigInt64Array(this.stats), statIndex('restarts'), 1n)
    const data: WriterData = { options: this.options, stats: this.stats }
    const worker = new Worker(new URL('./sqlite-writer.js', import.meta.url), {
      workerData: data,
      resourceLimits: WRITER_HEAP_LIMITS,
    })
    let onReady!: () => void
    let onFatal!: (error: Error) => void
    const ready = new Promise<void>((resolve, reject) => {
      onReady = resolve
      onFatal = reject
    })
    // Nobody may be awaiting readiness; its failure still reaches every write via the exit below.
    ready.catch(() => {})
    let fatal: Error | undefined
    worker.on('message', (message: FromWriter) => {
      if (message.type === 'ready') {
        // Referenced while starting, so a caller awaiting readiness keeps the process up.
        if (this.pending.size === 0 && !this.closing) worker.unref()
        onReady()
      } else if (message.type === 'fatal') fatal = deserializeError(message.error)
      else {
        let answered = 0
        for (const result of message.results) {
          answered = Math.max(answered, result.seq)
          const waiting = this.pending.get(result.seq)
          if (!waiting) continue
          this.pending.delete(result.seq)
          if (result.ok) waiting.resolve(result.value)
          else waiting.reject(deserializeError(result.error))
        }
        const unanswered = running.unanswered
        while (unanswered.length > 0 && (unanswered[0] as number) <= answered) unanswered.shift()
        if (this.outboxTarget === running) this.flushOutbox()
        if (this.pending.size === 0 && !this.closing) worker.unref()
      }
    })
    worker.on('error', (error) => {
      fatal ??= error
    })
    const exited = new Promise<void>((resolve) => {
      worker.once('exit', (code) => {
        if (this.running?.worker === worker) this.running = undefined
        const reason = fatal?.message ?? `thread exited with code ${code}`
        const clean = this.closing !== undefined && fatal === undefined && code === 0
        if (!clean) {
          this.diedAt = Date.now()
          this.lastDeath = reason
        }
        // Writes still waiting to be posted to it are among the pending ones rejected below.
        if (this.outboxTarget === running) {
          this.outbox = []
          this.outboxTarget = undefined
        }
        const error = new StoreUnavailableError(`the SQLite writer stopped: ${reason}`, { cause: fatal })
        onFatal(error)
        for (const [seq, waiting] of this.pending) {
          this.pending.delete(seq)
          waiting.reject(error)
        }
        resolve()
      })
    })
    const running: Running = { worker, ready, exited, unanswered: [] }
    this.running = running
    return running
  }
}
