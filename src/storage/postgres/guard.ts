import { StoreUnavailableError } from '../storage.js'
import { toStoreError, wasConnectionLost, wasSessionTerminated } from './connection.js'

/**
 * Runs `work` again on another connection while the one it was sent on turns out dead: the server
 * had ended the session (the statement did not run: see wasSessionTerminated) or, for `idempotent`
 * work only, the connection was reset, where the statement may or may not have run. A restart or
 * pg_terminate_backend ends every pooled connection, and a request that takes one in the moment
 * before the pool hears of it would get a 503 with the database back. Each dead one fails at once,
 * so `attempts` (pool size + 1) bounds the work, and the guard's deadline bounds the time.
 */
async function retriedOnDeadConnection<T>(
  work: () => Promise<T>,
  idempotent: boolean,
  attempts: number,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work()
    } catch (error) {
      const dead = wasSessionTerminated(error) || (idempotent && wasConnectionLost(error))
      if (!dead || attempt >= attempts) throw error
    }
  }
}

/**
 * Runs database work, turning connectivity failures into StoreUnavailableError (answered as 503).
 * With `deadlineMs`, work that has not settled by then (waiting for a connection included) fails
 * the same way; the statement itself goes on in the background (a write may still commit later, as
 * with any lost connection) until pg's query_timeout discards its connection.
 */
export async function guard<T>(
  work: () => Promise<T>,
  deadlineMs?: number,
  retry: { idempotent: boolean; attempts: number } = { idempotent: false, attempts: 1 },
): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  try {
    const pending = retriedOnDeadConnection(work, retry.idempotent, retry.attempts)
    if (deadlineMs === undefined) return await pending
    // Settled here, so a rejection after the deadline is not an unhandled one.
    pending.catch(() => {})
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new StoreUnavailableError(`PostgreSQL did not answer within ${deadlineMs} ms`)),
        deadlineMs,
      )
    })
    return await Promise.race([pending, deadline])
  } catch (error) {
    throw toStoreError(error)
  } finally {
    clearTimeout(timer)
  }
}
