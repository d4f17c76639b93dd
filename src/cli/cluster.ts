import cluster, { type Worker } from 'node:cluster'
import os from 'node:os'
import type { Config } from '../config.js'
import { UsageError } from './output.js'

/** Most worker processes `--workers` accepts; far above any sensible core count. */
const MAX_WORKERS = 256

/**
 * Reads `--workers`: a whole number from 1 to 256, or `auto` for one per core the process may use
 * (os.availableParallelism(), which honours CPU affinity). Absent means 1: no cluster at all.
 */
export function parseWorkers(raw: string | undefined): number {
  if (raw === undefined) return 1
  const value = raw.trim().toLowerCase()
  if (value === 'auto') return os.availableParallelism()
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > MAX_WORKERS) {
    throw new UsageError(`--workers must be a whole number from 1 to ${MAX_WORKERS} or "auto", got "${raw}"`)
  }
  return Number(value)
}

export interface ClusterOptions {
  workers: number
  config: Pick<Config, 'logLevel' | 'shutdownTimeoutMs'>
  /** First delay before a dead worker is replaced; doubles with every quick death, up to maxRestartDelayMs. */
  restartDelayMs?: number
  maxRestartDelayMs?: number
  /** A worker that stayed up this long counts as healthy: its slot's backoff starts over. */
  stableAfterMs?: number
}

const levels = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const
type Level = keyof typeof levels

/** JSON lines in the same shape as the workers' (pino) logs, so one log pipeline reads both. */
export function primaryLogger(logLevel: Config['logLevel']) {
  const threshold = logLevel === 'silent' ? Number.POSITIVE_INFINITY : levels[logLevel]
  const hostname = os.hostname()
  return (level: Level, fields: Record<string, unknown>, msg: string) => {
    if (levels[level] < threshold) return
    const line = {
      level,
      time: new Date().toISOString(),
      pid: process.pid,
      hostname,
      role: 'primary',
      ...fields,
      msg,
    }
    process.stdout.write(`${JSON.stringify(line)}\n`)
  }
}

/** What a worker whose store failed for good sends its primary (serve.ts), instead of exiting. */
export const STORE_FAILED = { plantStore: 'store-failed' } as const

const isStoreFailed = (message: unknown) =>
  (message as { plantStore?: unknown } | null)?.plantStore === STORE_FAILED.plantStore

interface Slot {
  index: number
  worker: Worker | undefined
  /** Workers of this slot whose store failed: they answer until the slot's next worker listens. */
  retiring: Worker[]
  startedAt: number
  /** Deaths in a row that came sooner than stableAfterMs after the start. */
  quickDeaths: number
  listening: boolean
  restartTimer: NodeJS.Timeout | undefined
}

/**
 * `serve --workers N` in the primary process: forks N workers that each run the ordinary serve path
 * (node:cluster shares the listening socket between them), replaces a worker that dies with
 * exponential backoff, and on SIGTERM or SIGINT passes the signal on, waits for every worker to
 * drain and exits 0 (1 if a worker failed to drain or the cluster never came up). Never returns.
 *
 * The caller has opened the store once before this, which applied any pending migration, so the
 * workers start on a current schema (migrations are also safe to run concurrently).
 */
export function runCluster(options: ClusterOptions): Promise<never> {
  const { workers, config } = options
  // The workers accept from the shared socket themselves. Under Node's round robin a connection
  // handed to a worker as it dies is never answered nor closed (nodejs/node#3551); accepted by
  // the workers, a dying worker's connections are reset by the kernel at once, and those not yet
  // accepted go to the others. NODE_CLUSTER_SCHED_POLICY=rr still chooses the other.
  if (process.env.NODE_CLUSTER_SCHED_POLICY === undefined) cluster.schedulingPolicy = cluster.SCHED_NONE
  const restartDelayMs = options.restartDelayMs ?? 500
  const maxRestartDelayMs = options.maxRestartDelayMs ?? 30_000
  const stableAfterMs = options.stableAfterMs ?? 30_000
  const log = primaryLogger(config.logLevel)

  const slots: Slot[] = Array.from({ length: workers }, (_, index) => ({
    index,
    worker: undefined,
    retiring: [],
    startedAt: 0,
    quickDeaths: 0,
    listening: false,
    restartTimer: undefined,
  }))
  let ready = false
  let stopping = false
  let failedDrain = false

  const exit = (code: number) => {
    // Let the last log line out before the process goes.
    process.stdout.write('', () => process.exit(code))
  }

  const workersAlive = () =>
    slots.flatMap((slot) => (slot.worker ? [slot.worker, ...slot.retiring] : slot.retiring))
  const live = () => workersAlive().length

  /** The next worker of a slot whose worker died or failed, after the slot's backoff. */
  const replace = (
    slot: Slot,
    fields: Record<string, unknown>,
    msg: string,
    level: 'info' | 'error' = 'error',
  ) => {
    const lived = Date.now() - slot.startedAt
    slot.quickDeaths = lived >= stableAfterMs ? 0 : slot.quickDeaths + 1
    const delay = Math.min(maxRestartDelayMs, restartDelayMs * 2 ** Math.max(0, slot.quickDeaths - 1))
    log(level, { ...fields, livedMs: lived, restartInMs: delay }, msg)
    slot.restartTimer = setTimeout(() => fork(slot), delay)
  }

  const fork = (slot: Slot) => {
    slot.restartTimer = undefined
    slot.startedAt = Date.now()
    slot.listening = false
    const worker = cluster.fork()
    slot.worker = worker
    worker.once('listening', () => {
      slot.listening = true
      log('info', { worker: slot.index + 1, workerPid: worker.process.pid }, 'worker listening')
      // Only now do the failed ones stop: one worker at least listens, so the port stays open.
      for (const old of slot.retiring) old.process.kill('SIGTERM')
      if (!ready && slots.every((s) => s.listening)) {
        ready = true
        const pids = slots.map((s) => s.worker?.process.pid)
        log('info', { workers, pids }, `cluster ready: ${workers} workers share the port`)
      }
    })
    worker.on('message', (message: unknown) => {
      if (!isStoreFailed(message) || slot.worker !== worker || stopping) return
      // It goes on answering (reads, and 503 to writes) until its replacement listens.
      slot.worker = undefined
      slot.listening = false
      slot.retiring.push(worker)
      replace(
        slot,
        { worker: slot.index + 1, workerPid: worker.process.pid },
        "worker's store failed; replacing it",
      )
    })
    worker.once('exit', (code, signal) => {
      const fields = { worker: slot.index + 1, workerPid: worker.process.pid, code, signal }
      const retired = slot.retiring.indexOf(worker)
      if (retired !== -1) slot.retiring.splice(retired, 1)
      else {
        slot.worker = undefined
        slot.listening = false
      }
      if (stopping) {
        if (code !== 0) failedDrain = true
        log(code === 0 ? 'info' : 'error', fields, 'worker stopped')
        if (live() === 0) {
          log('info', {}, 'all workers stopped')
          exit(failedDrain ? 1 : 0)
        }
        return
      }
      if (retired !== -1) {
        log('info', fields, 'replaced worker stopped')
        return
      }
      if (!ready) {
        // As a single process would: a service that cannot start fails instead of retrying forever.
        log('fatal', fields, 'a worker exited before the cluster was ready; stopping')
        stop('SIGTERM', 1)
        return
      }
      // A clean exit is a worker stopped on purpose (a rolling restart sends it SIGTERM); a crash is an error.
      if (code === 0) replace(slot, fields, 'worker exited cleanly; starting another', 'info')
      else replace(slot, fields, 'worker died; replacing it')
    })
  }

  const stop = (signal: NodeJS.Signals, code = 0) => {
    if (stopping) return
    stopping = true
    if (code !== 0) failedDrain = true
    for (const slot of slots) {
      if (slot.restartTimer) clearTimeout(slot.restartTimer)
      slot.restartTimer = undefined
    }
    log('info', { signal, workers: live() }, 'shutting down: workers finish their requests in flight')
    if (live() === 0) {
      exit(failedDrain ? 1 : 0)
      return
    }
    for (const worker of workersAlive()) worker.process.kill(signal)
    // Each worker bounds its own drain by SHUTDOWN_TIMEOUT_MS; this is the backstop for a stuck one.
    setTimeout(() => {
      log('error', { workers: live() }, 'workers did not stop in time; killing them')
      for (const worker of workersAlive()) worker.process.kill('SIGKILL')
      setTimeout(() => exit(1), 1_000).unref()
    }, config.shutdownTimeoutMs + 15_000).unref()
  }

  // A second signal (a terminal's Ctrl-C reaches every process in the group) does not cut the drain short.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => stop(signal))

  log('info', { workers }, `starting ${workers} workers`)
  for (const slot of slots) fork(slot)
  return new Promise<never>(() => {})
}
