/**
 * Takes back a commit whose WAL sync failed, so that the requests answered with an error for it
 * stored nothing. The writer commits with SQLite's syncs off and syncs the WAL itself
 * (`group-commit.ts`); when that sync fails, the transaction is already in the WAL and in the
 * kernel's page cache, and without this a restart, or the checkpoint a clean close runs, kept it
 * (the sync-failure test found all 40 refused creates stored, after SIGTERM and after SIGKILL
 * alike). `discard_last_commit()` in `native/discard-commit.c` cuts the WAL's valid log just
 * before the transaction, for every later recovery and every connection on the file.
 */
import fs from 'node:fs'
import type Database from 'better-sqlite3'
import { addWalFunctions } from './wal-coalescing.js'

/** What became of the commit. */
export type DiscardOutcome =
  | { discarded: true }
  /** Cut in the page cache, so no restart finds it; the cut's own sync failed, so a power cut may. */
  | { discarded: true; unsynced: string }
  | { discarded: false; why: string }

/** What became of the commit, in words for the error its requests get (and the log). */
export function describeOutcome(outcome: DiscardOutcome): string {
  if (!outcome.discarded) {
    return `its commit could not be discarded (${outcome.why}): its writes may be there after a restart`
  }
  if ('unsynced' in outcome) {
    return `its commit is discarded, but the WAL could not be synced after it (${outcome.unsynced}): none of its writes is kept after a restart, though a power cut may bring them back`
  }
  return 'its commit is discarded: none of its writes is kept'
}

/** Pauses between tries while a checkpoint, a reader or another process's write holds a lock it needs. */
const RETRY_MS = 5
/** How long it keeps trying before it gives up; a checkpoint of a long WAL can take seconds. */
const GIVE_UP_AFTER_MS = 10_000

const isBusy = (error: unknown) => String((error as { code?: unknown }).code).startsWith('SQLITE_BUSY')

export class CommitDiscarder {
  private readonly discard

  /**
   * `walPath` is the store's WAL, synced after a discard; `available` false (or the library not
   * loading) leaves nothing to discard with.
   */
  constructor(
    db: Database.Database,
    private readonly walPath: string,
    available: boolean,
  ) {
    this.discard = addWalFunctions(db, available)
      ? db.prepare('SELECT discard_last_commit()').pluck()
      : undefined
  }

  /**
   * Discards the last commit of the connection, if it is still the last in the WAL and no
   * checkpoint has copied it; `done` hears what became of it. The function needs every lock of
   * the WAL but that of readers of the database file alone, the readers' included, so this
   * process's read connection must hold no snapshot meanwhile. Locks held by a checkpoint, by
   * another process's write or by a reader are waited for on timers, never on the event loop.
   */
  discardLast(done: (outcome: DiscardOutcome) => void, since = Date.now()): void {
    if (!this.discard) {
      done({ discarded: false, why: 'the wal-coalesce library, which discards it, is not loaded' })
      return
    }
    let answer: number
    try {
      answer = Number(this.discard.get())
    } catch (error) {
      if (isBusy(error) && Date.now() - since < GIVE_UP_AFTER_MS) {
        setTimeout(() => this.discardLast(done, since), RETRY_MS)
        return
      }
      done({ discarded: false, why: `discarding it failed: ${(error as Error).message}` })
      return
    }
    if (answer === 1) this.syncCut(done)
    else if (answer === -1)
      done({ discarded: false, why: 'a checkpoint had already copied it into the database file' })
    else done({ discarded: false, why: 'another connection committed after it' })
  }

  /**
   * Syncs the WAL's cut on libuv's thread pool, through a descriptor opened now: the writer's own
   * has just reported a failed sync, and Linux reports a writeback error once to every descriptor
   * that was open when it happened, so a sync through any older one would fail for that error.
   */
  private syncCut(done: (outcome: DiscardOutcome) => void): void {
    const unsynced = (error: Error) => done({ discarded: true, unsynced: error.message })
    fs.open(this.walPath, 'r+', (opened, fd) => {
      if (opened) return unsynced(opened)
      fs.fdatasync(fd, (synced) =>
        fs.close(fd, () => (synced ? unsynced(synced) : done({ discarded: true }))),
      )
    })
  }
}
