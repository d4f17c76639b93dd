import { setTimeout as sleep } from 'node:timers/promises'
import { StoreUnavailableError } from '../storage.js'
import { toStoreError, wasConnectionLost, wasNeverRun, wasSessionTerminated } from './connection.js'

/** What a call may be tried again on: see retried. */
export interface RetryPolicy {
  /** The statement may safely run twice (reads, creates): then a lost connection is retried too. */
  idempotent: boolean
  /** Immediate retries on dead pooled connections (pool size + 1: each may be dead after a restart). */
  attempts: number
  /** False: no backoff, for a probe (/readyz) that must answer at once rather than wait. */
  waits?: boolean
}

const FIRST_BACKOFF_MS = 50
const MAX_BACKOFF_MS = 1000

/** 50, 100, 200 ... 1000 ms, each from half to all of it, so instances do not retry in step. */
function backoff(retry: number): number {
  const ceiling = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** retry)
  return ceiling / 2 + Math.random() * (ceiling / 2)
}

/**
 * Runs `work` again while it fails in a way a failover or restart explains, until `until` (a
 * Date.now() time). A dead pooled connection (the server ended the session, or, for idempotent work
 * only, the connection was reset) is retried at once: the next pooled one is likely fine. A call the
 * server never ran (refused or timed-out connect, 57P03 starting up, 25006 read-only, a host of the
 * wrong role) is retried after a backoff, every call alike, so a failover shorter than the deadline
 * costs latency, not a 503. `stopped()` ends the loop once the caller has answered.
 */
async function retried<T>(
  work: () => Promise<T>,
  policy: RetryPolicy,
  until: number,
  stopped: () => boolean,
  seen: { last?: unknown },
): Promise<T> {
  let immediate = 0
  let waits = 0
  for (;;) {
    try {
      return await work()
    } catch (error) {
      seen.last = error
      const dead = wasSessionTerminated(error) || (policy.idempotent && wasConnectionLost(error))
      if (dead && ++immediate < policy.attempts && !stopped()) continue
      if ((!dead && !wasNeverRun(error)) || policy.waits === false) throw error
      const delay = backoff(waits++)
      if (stopped() || Date.now() + delay >= until) throw error
      await sleep(delay)
    }
  }
}

/**
 * Runs database work, turning connectivity failures into StoreUnavailableError (answered as 503).
 * With `until` (a Date.now() time), work that has not settled by then (waiting for a connection and
 * retries included) fails the same way; the statement itself goes on in the background (a write may
 * still commit later, as with any lost connection) until pg's query_timeout discards its connection.
 */
export async function guard<T>(
  work: () => Promise<T>,
  until?: number,
  policy: RetryPolicy = { idempotent: false, attempts: 1 },
): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  let settled = false
  const seen: { last?: unknown } = {}
  try {
    // With no deadline, only dead connections are retried (at once): nothing bounds a backoff.
    const pending = retried(work, policy, until ?? 0, () => settled, seen)
    if (until === undefined) return await pending
    // Settled here, so a rejection after the deadline is not an unhandled one.
    pending.catch(() => {})
    const left = until - Date.now()
    const deadline = new Promise<never>((_resolve, reject) => {
      // With the failure the retries met, so a start-up that gives up says why (a standby, say).
      timer = setTimeout(
        () => {
          const why = seen.last instanceof Error ? `; the last attempt: ${seen.last.message}` : ''
          const message = `PostgreSQL did not answer within the request's deadline${why}`
          reject(new StoreUnavailableError(message, { cause: seen.last }))
        },
        Math.max(0, left),
      )
    })
    return await Promise.race([pending, deadline])
  } catch (error) {
    throw toStoreError(error)
  } finally {
    settled = true
    clearTimeout(timer)
  }
}
