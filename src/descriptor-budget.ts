import { readFileSync } from 'node:fs'
import { mostWebhookSends } from './webhooks/concurrency.js'

/** The open-file limit assumed where /proc/self/limits cannot be read (not Linux): a common default. */
const FALLBACK_FILE_LIMIT = 1024

/** The soft limit on open files of this process, from Linux's /proc/self/limits. */
export function openFileLimit(limits?: string): number {
  let text = limits
  try {
    text ??= readFileSync('/proc/self/limits', 'utf8')
  } catch {
    return FALLBACK_FILE_LIMIT
  }
  const line = text.split('\n').find((row) => row.startsWith('Max open files'))
  const soft = line?.slice('Max open files'.length).trim().split(' ')[0]
  if (soft === 'unlimited') return 1_048_576
  return soft && /^\d+$/.test(soft) ? Number(soft) : FALLBACK_FILE_LIMIT
}

/**
 * Descriptors the process holds whatever it serves, measured on an idle service (35): standard
 * streams, the event loops of the main thread and of the SQLite writer thread with their pipes,
 * the listening sockets, libuv's spare for accept(), and files the thread pool opens for a moment
 * (DNS lookups of webhook sends, /proc reads of a scrape).
 */
const PROCESS_BASE = 40
/** SQLite: the database, its WAL and shared memory, for each of three connections, and a backup's file. */
const SQLITE_FILES = 12
/** PostgreSQL: one socket per pooled connection, and one per pool for a connection being replaced. */
const POOL_SPARE = 1
/** A pretty-printing log transport runs in a worker thread: its event loop and pipes. */
const PRETTY_LOGS = 8
/** The OTLP exporter's keep-alive sockets. */
const TRACE_EXPORT = 4
/** Connections the METRICS_PORT listener serves at once: a few scrapers, never a crowd. */
export const METRICS_MAX_CONNECTIONS = 16

/** What the budget is computed from: the settings that open descriptors. */
export interface BudgetInputs {
  databaseUrl: string | undefined
  /** With it, DB_POOL_SIZE is split between two pools, each with its spare. */
  databaseReadUrl?: string | undefined
  dbPoolSize: number
  webhookWorker: boolean
  metricsPort: number | undefined
  tracing: boolean
  logFormat: 'json' | 'pretty'
}

export interface DescriptorBudget {
  /** The process's open-file limit. */
  files: number
  /** What the process itself may hold, by what holds it. */
  reserved: Record<'process' | 'store' | 'webhookSends' | 'metrics' | 'logs' | 'tracing', number>
  /** Connections over the cap that are answered (503) rather than closed unread, at once. */
  refusals: number
  /** The default for MAX_CONNECTIONS: what is left. */
  maxConnections: number
  /** The METRICS_PORT listener's cap. */
  metricsConnections: number
}

/**
 * The one budget of the process's descriptors: from the open-file limit, it reserves what the
 * process opens itself (the store or the pool, webhook sends at their most, the metrics listener
 * at its cap, logs, tracing) and a few for answering refused connections; the API's connection cap
 * is what is left. docs/limits.md explains each figure.
 */
export function descriptorBudget(inputs: BudgetInputs, limits?: string): DescriptorBudget {
  const files = openFileLimit(limits)
  const reserved = {
    process: PROCESS_BASE,
    store: inputs.databaseUrl
      ? inputs.dbPoolSize + POOL_SPARE * (inputs.databaseReadUrl ? 2 : 1)
      : SQLITE_FILES,
    webhookSends: inputs.webhookWorker ? mostWebhookSends() : 0,
    metrics: inputs.metricsPort === undefined ? 0 : METRICS_MAX_CONNECTIONS + 1,
    logs: inputs.logFormat === 'pretty' ? PRETTY_LOGS : 0,
    tracing: inputs.tracing ? TRACE_EXPORT : 0,
  }
  const refusals = refusalReserve(files)
  const held = Object.values(reserved).reduce((sum, n) => sum + n, 0)
  return {
    files,
    reserved,
    refusals,
    maxConnections: Math.max(1, files - held - refusals),
    metricsConnections: METRICS_MAX_CONNECTIONS,
  }
}

/**
 * Descriptors kept for connections past the cap, so that each gets its 503 before it is closed:
 * a 16th of the limit, from 16 to 256. Past the cap and this reserve, Node closes them unread.
 */
export function refusalReserve(files: number): number {
  return Math.min(256, Math.max(16, Math.floor(files / 16)))
}
