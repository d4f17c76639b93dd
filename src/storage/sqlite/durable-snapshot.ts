import type Database from 'better-sqlite3'
import type { SnapshotHold } from './group-commit.js'

/**
 * What the read connection shows: while this process's writer waits for the sync of a commit, the
 * snapshot before that commit, so that no read shows a plant whose create could still be lost.
 * In WAL mode a read transaction's snapshot is fixed by its first read, so holding it is a BEGIN
 * and one read before the writer's COMMIT, and releasing it a COMMIT once the sync returned.
 *
 * That held snapshot also hides what other processes on the file commit meanwhile, and one of
 * them may already have answered 200 for it: a client that created a plant through one worker
 * and listed through another did not see it (7 of 800 tries with `--workers 2` under load). So a
 * read that finds another connection committed since the hold began waits for the release, a
 * sync at most, and then reads the newest snapshot. `othersVersion` is SQLite's
 * `PRAGMA data_version` of the writer's connection, which moves only when another connection
 * commits; in a process alone on its file no read ever waits.
 */
export class DurableSnapshot implements SnapshotHold {
  private readonly begin
  private readonly firstRead
  private readonly end
  private versionAtHold = 0
  private waiting: Array<() => void> = []
  /** No release will come (the writer broke): reads stay on the held snapshot without waiting. */
  private frozen = false
  /** Reads wait for this while the writer takes a commit back (`suspend`). */
  private suspended: { until: Promise<void>; resume: () => void } | undefined

  constructor(
    private readonly db: Database.Database,
    private readonly othersVersion: () => number,
  ) {
    this.begin = db.prepare('BEGIN')
    this.firstRead = db.prepare('SELECT count(*) FROM schema_migrations')
    this.end = db.prepare('COMMIT')
  }

  hold(): void {
    if (this.db.inTransaction) return
    this.begin.run()
    this.firstRead.get()
    this.versionAtHold = this.othersVersion()
  }

  release(): void {
    if (this.db.inTransaction) this.end.run()
    this.wake()
  }

  /** The writer will never release the snapshot: reads go on with it, as they are. */
  freeze(): void {
    this.frozen = true
    this.wake()
  }

  /**
   * Ends the held snapshot and makes reads wait until `resume`: the writer is taking back a commit
   * whose sync failed, which needs every reader of the WAL gone, and until it is done the newest
   * snapshot would show that commit.
   */
  suspend(): void {
    if (this.db.inTransaction) this.end.run()
    if (this.suspended) return
    let resume = () => {}
    const until = new Promise<void>((resolve) => (resume = resolve))
    this.suspended = { until, resume }
  }

  /** Reads go on, on the newest snapshot (the writer broke: it takes no more holds). */
  resume(): void {
    const suspended = this.suspended
    this.suspended = undefined
    suspended?.resume()
    this.wake()
  }

  /**
   * Undefined when a read may run now; otherwise a promise that resolves once it may. Waiters
   * resume in the release's own turn of the event loop, before the writer can take another hold.
   */
  ready(): Promise<void> | undefined {
    if (this.suspended) return this.suspended.until
    if (!this.db.inTransaction || this.frozen) return undefined
    if (this.othersVersion() === this.versionAtHold) return undefined
    return new Promise((resolve) => this.waiting.push(resolve))
  }

  private wake(): void {
    const waiting = this.waiting
    this.waiting = []
    for (const resume of waiting) resume()
  }
}
