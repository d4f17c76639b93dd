import fs from 'node:fs'
import os from 'node:os'

/** The file calls a destination makes; fs's own, or a test's stand-in. */
export interface LogIo {
  write(
    fd: number,
    data: Buffer,
    callback: (error: NodeJS.ErrnoException | null, written: number) => void,
  ): void
  writeSync(fd: number, data: Buffer): number
}

/** Errors after which the same write can succeed: try again shortly. */
const RETRY_LATER = new Set(['EAGAIN', 'EBUSY'])
/** The reader is gone (`serve | head`): nothing written to this descriptor can arrive any more. */
const READER_GONE = new Set(['EPIPE', 'EBADF', 'ECONNRESET'])
const RETRY_MS = 10
/**
 * How long a line may wait for the lines after it. Each asynchronous write is a hop to libuv's
 * thread pool and back; a write per event-loop turn cost PostgreSQL list requests ~100 µs of CPU each.
 */
const FLUSH_DELAY_MS = 10
/** Queued log text that is written at once, without waiting for the delay. */
const FLUSH_BYTES = 64 * 1024
/** Log text queued while the reader is slow; past this, new lines are dropped (and counted). */
const MAX_QUEUED_BYTES = 8 * 1024 * 1024

/**
 * Where pino writes the service's log lines: one asynchronous write at a time, in order, without
 * blocking the event loop, carrying every line queued since the last (at most FLUSH_DELAY_MS
 * after its first line). Unlike pino's own stream it never retries a failed write in a loop at
 * exit (sonic-boom retries any error there every 100 ms for ever, so `serve | head` never exited
 * on SIGTERM), and it never drops a line silently: lines lost to a full disk or an I/O error are
 * counted, and one line on stderr says how many once a write succeeds again, or at exit.
 */
export class LogDestination {
  /** Lines lost so far (full disk, I/O error, reader gone, queue full). */
  dropped = 0
  private unreported = 0
  private lastError = ''
  private queue: string[] = []
  private queuedBytes = 0
  private writing = false
  private timer: NodeJS.Timeout | undefined
  private readerGone = false

  constructor(
    private readonly fd: number,
    private readonly io: LogIo = fs,
    private readonly report: (line: string) => void = reportOnStderr,
    private readonly flushDelayMs = FLUSH_DELAY_MS,
  ) {}

  /** pino's stream interface: one JSON line, newline included. */
  write(line: string): boolean {
    if (this.readerGone || this.queuedBytes + line.length > MAX_QUEUED_BYTES) {
      this.drop(1, this.readerGone ? 'EPIPE' : 'log queue full')
      return true
    }
    this.queue.push(line)
    this.queuedBytes += line.length
    if (!this.writing) this.schedule()
    return true
  }

  /** The next write: now when enough is queued, else after the delay, which gathers what follows. */
  private schedule(): void {
    if (this.queuedBytes >= FLUSH_BYTES) this.writeQueued()
    else if (!this.timer && this.queue.length > 0)
      this.timer = setTimeout(() => this.writeQueued(), this.flushDelayMs).unref()
  }

  private take(): { data: Buffer; lines: number } {
    const data = Buffer.from(this.queue.join(''))
    const lines = this.queue.length
    this.queue = []
    this.queuedBytes = 0
    return { data, lines }
  }

  private writeQueued(): void {
    clearTimeout(this.timer)
    this.timer = undefined
    if (this.queue.length === 0) return
    this.writing = true
    const { data, lines } = this.take()
    this.send(data, lines)
  }

  private send(data: Buffer, lines: number): void {
    this.io.write(this.fd, data, (error, written) => {
      if (error && RETRY_LATER.has(error.code ?? '')) {
        setTimeout(() => this.send(data, lines), RETRY_MS).unref()
        return
      }
      if (error) {
        this.failed(error, lines)
      } else if (written < data.length) {
        this.send(data.subarray(written), lines)
        return
      } else {
        this.succeeded()
      }
      this.writing = false
      this.schedule()
    })
  }

  private failed(error: NodeJS.ErrnoException, lines: number): void {
    if (READER_GONE.has(error.code ?? '')) {
      this.readerGone = true
      this.drop(lines + this.queue.length, error.code ?? 'EPIPE')
      this.take()
    } else this.drop(lines, error.code ?? error.message)
  }

  private drop(lines: number, reason: string): void {
    this.dropped += lines
    this.unreported += lines
    this.lastError = reason
  }

  private succeeded(): void {
    if (this.unreported === 0) return
    this.report(this.summary())
    this.unreported = 0
  }

  /** A line in the format of the service's own (level name, ISO time, pid, hostname). */
  private summary(): string {
    const line = {
      level: 'warn',
      time: new Date().toISOString(),
      pid: process.pid,
      hostname: os.hostname(),
      dropped: this.unreported,
      droppedTotal: this.dropped,
      msg: `${this.unreported} log lines could not be written to stdout (${this.lastError})`,
    }
    return `${JSON.stringify(line)}\n`
  }

  /**
   * At exit: one synchronous attempt at what is still queued (a write in flight is left to finish
   * or fail on its own), and the count of lines lost, on stderr, if any. Never waits for a reader.
   */
  flushSync(): void {
    if (!this.readerGone && this.queue.length > 0) {
      const { data, lines } = this.take()
      try {
        for (let offset = 0; offset < data.length;)
          offset += this.io.writeSync(this.fd, data.subarray(offset))
      } catch (error) {
        this.drop(lines, (error as NodeJS.ErrnoException).code ?? 'write failed')
      }
    }
    if (this.unreported > 0) {
      this.report(this.summary())
      this.unreported = 0
    }
  }
}

function reportOnStderr(line: string): void {
  try {
    fs.writeSync(2, line)
  } catch {
    // stderr is gone too: the count stays on LogDestination.dropped.
  }
}

let stdoutDestination: LogDestination | undefined

/** The process's one destination for stdout, flushed once at exit. */
export function stdoutLog(): LogDestination {
  if (!stdoutDestination) {
    const destination = new LogDestination(1)
    process.once('exit', () => destination.flushSync())
    stdoutDestination = destination
  }
  return stdoutDestination
}
