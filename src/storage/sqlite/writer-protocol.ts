/**
 * The messages between SqliteStorage (main thread) and the writer thread, and the counters they
 * share. Everything crosses by structured clone, which keeps BigInt ids and Dates exact.
 */
import Database from 'better-sqlite3'
import type { AttemptResult, ClaimRequest, Plant, Subscription, TokenRecord } from '../storage.js'
import { StoreUnavailableError } from '../storage.js'
import type { SqliteOptions } from './database.js'

/** One write, as the writer runs it. */
export type WriteOp =
  | { op: 'createPlant'; plant: Plant; payload: string }
  | { op: 'deletePlant'; id: bigint }
  | { op: 'createToken'; token: TokenRecord }
  | { op: 'revokeToken'; id: string; at: number }
  | { op: 'touchToken'; id: string; at: number }
  | { op: 'addSubscription'; subscription: Subscription }
  | { op: 'removeSubscription'; id: string }
  | { op: 'claimDeliveries'; request: ClaimRequest }
  | { op: 'recordAttempt'; result: AttemptResult }

/** Main → writer. `close` comes last: the writer finishes everything before it, then exits. */
export type ToWriter = (WriteOp & { seq: number }) | { op: 'close' }

export interface SerializedError {
  name: string
  message: string
  code?: string
}

export type WriteResult =
  { seq: number; ok: true; value: unknown } | { seq: number; ok: false; error: SerializedError }

/** Writer → main. `results` answers a whole batch at once, and only after its COMMIT returned. */
export type FromWriter =
  { type: 'ready' } | { type: 'results'; results: WriteResult[] } | { type: 'fatal'; error: SerializedError }

export interface WriterData {
  options: SqliteOptions
  /** Backs WriterStats; shared, so the counters survive a writer restart and cost no messages. */
  stats: SharedArrayBuffer
}

/** Counters of the writer, for tests and operators. */
export interface WriterStats {
  /** Transactions begun (one per batch). */
  batchesStarted: number
  batchesCommitted: number
  /** Batches rolled back; every request in them was answered with the error. */
  batchesFailed: number
  /** Requests in committed batches. */
  requestsCommitted: number
  largestBatch: number
  /** Times the writer thread was started after the first. */
  restarts: number
}

export const STAT_KEYS = [
  'batchesStarted',
  'batchesCommitted',
  'batchesFailed',
  'requestsCommitted',
  'largestBatch',
  'restarts',
] as const satisfies readonly (keyof WriterStats)[]

export const statIndex = (key: keyof WriterStats): number => STAT_KEYS.indexOf(key)

export const newStatsBuffer = () => new SharedArrayBuffer(STAT_KEYS.length * 8)

export function readStats(buffer: SharedArrayBuffer): WriterStats {
  const view = new BigInt64Array(buffer)
  const entries = STAT_KEYS.map((key, i) => [key, Number(Atomics.load(view, i))])
  return Object.fromEntries(entries) as WriterStats
}

export function serializeError(error: unknown): SerializedError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) }
  const code = (error as { code?: unknown }).code
  return { name: error.name, message: error.message, ...(typeof code === 'string' ? { code } : {}) }
}

/**
 * Rebuilds a writer error on the main thread: a lock held elsewhere past the busy timeout is a
 * StoreUnavailableError (503, retry later); any other SQLite error keeps its class and code.
 */
export function deserializeError(error: SerializedError): Error {
  if (error.code === 'SQLITE_BUSY' || error.code?.startsWith('SQLITE_BUSY_'))
    return new StoreUnavailableError(`SQLite is busy: ${error.message}`)
  if (error.code) return new Database.SqliteError(error.message, error.code)
  const rebuilt = new Error(error.message)
  rebuilt.name = error.name
  return rebuilt
}
