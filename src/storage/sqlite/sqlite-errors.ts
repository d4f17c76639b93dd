/** How SQLite's errors on a write become what the writer and its clients make of them. */
import { StoreReadOnlyError, StoreUnavailableError, StoreWriteError } from '../storage.js'

const sqliteCode = (error: unknown): string => {
  const code = (error as { code?: unknown }).code
  return typeof code === 'string' ? code : ''
}

/** Another connection holds the lock SQLite needed. */
export const isBusy = (error: unknown) => sqliteCode(error).startsWith('SQLITE_BUSY')

/**
 * What the client of a failed write hears. A held lock, a full disk, an I/O error or a file this
 * process may not write is the store's state, not a bug: a 503 to retry (a full disk answered
 * 500 INTERNAL). Any other error keeps its class and code.
 */
export function storeError(error: unknown): Error {
  const code = sqliteCode(error)
  const message = (error as Error).message
  if (code.startsWith('SQLITE_BUSY')) return new StoreUnavailableError(`SQLite is busy: ${message}`)
  if (code.startsWith('SQLITE_READONLY')) {
    return new StoreReadOnlyError(`the SQLite store takes no writes: ${message}`, { cause: error })
  }
  if (code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR')) {
    return new StoreWriteError(`the SQLite store could not be written: ${message}`, { cause: error })
  }
  return error instanceof Error ? error : new Error(String(error))
}

/** Whether a failed write says something about the store's disk, which /readyz should show. */
export const isDiskTrouble = (error: Error) =>
  error instanceof StoreWriteError || error instanceof StoreReadOnlyError

/**
 * An I/O error from SQLite while it wrote or synced the store. After a failed sync the kernel may
 * have dropped pages it then forgets about (a later sync can succeed without them), so nothing
 * written since the last good sync can be vouched for: the writer takes no more writes.
 */
export const isIoError = (error: unknown) => sqliteCode(error).startsWith('SQLITE_IOERR')
