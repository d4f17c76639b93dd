import { AsyncLocalStorage } from 'node:async_hooks'

const started = new AsyncLocalStorage<number>()

/**
 * Runs `work` as part of the request received at `at` (Date.now()): every store call made in it,
 * however many, shares one deadline counted from then (the PostgreSQL adapter's guard), so a
 * token lookup and a create together still answer by the documented time.
 */
export function inRequest<T>(at: number, work: () => T): T {
  return started.run(at, work)
}

/** When the request this call belongs to was received; undefined outside one (the CLI, a worker). */
export function requestStartedAt(): number | undefined {
  return started.getStore()
}
