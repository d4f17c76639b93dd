/**
 * When the writer's WAL is copied into the database file, and when writes wait so that the WAL can
 * start over from its beginning. The copies themselves run in the checkpointer thread.
 */
import { Checkpointer } from './checkpointer.js'
import type { SqliteOptions } from './database.js'

/**
 * Commits after which the checkpointer copies the WAL into the database file, while writes go on.
 * SQLite reuses the WAL from its start only when a transaction begins with every frame copied,
 * which a busy writer would never allow; so writes then wait for one more checkpoint (RESTART) of
 * the few frames committed meanwhile. Overwriting a WAL of a few hundred frames keeps each fsync cheap;
 * appending to an ever longer one makes every sync update the file's size as well.
 */
const CHECKPOINT_EVERY_COMMITS = 100

/** What the recycler needs to know of the writer, and how it lets writes go on. */
export interface RecyclerHost {
  /** A batch is between BEGIN and its answers: it may commit after a checkpoint looked. */
  batchActive(): boolean
  /** The writer is closing or broken: no more checkpoints are asked for. */
  stopped(): boolean
  /** Writes held for a RESTART checkpoint may go on. */
  resume(): void
}

export class WalRecycler {
  private readonly checkpointer: Checkpointer
  private commitsSinceCheckpoint = 0
  private waitingForCheckpoint = false
  private finished = 0

  constructor(
    options: Pick<SqliteOptions, 'path' | 'synchronous'>,
    private readonly host: RecyclerHost,
  ) {
    // Its thread starts with the first checkpoint, not here: loading it beside the service's own
    // start made start to ready 100-150 ms longer on one core (docs/performance-history.md,
    // fourth round).
    this.checkpointer = new Checkpointer({ path: options.path, synchronous: options.synchronous })
  }

  /** Writes wait for a checkpoint that lets the WAL start over. */
  get holdsWrites(): boolean {
    return this.waitingForCheckpoint
  }

  /** Checkpoints the checkpointer thread finished. */
  get checkpoints(): number {
    return this.finished
  }

  /** Called after every batch, committed or not. */
  batchDone(): void {
    this.commitsSinceCheckpoint++
    this.maybeCheckpoint()
  }

  close(): Promise<void> {
    return this.checkpointer.close()
  }

  private maybeCheckpoint(): void {
    const due = this.commitsSinceCheckpoint >= CHECKPOINT_EVERY_COMMITS || this.waitingForCheckpoint
    if (!due || this.checkpointer.running || this.host.stopped()) return
    this.commitsSinceCheckpoint = 0
    this.checkpointer.checkpoint(this.waitingForCheckpoint ? 'RESTART' : 'PASSIVE').then(
      (result) => {
        this.finished++
        if (this.waitingForCheckpoint) {
          // The catch-up ran with no write in between; whatever it achieved, writes go on (a
          // reader in another process can keep any checkpoint from catching up).
          this.waitingForCheckpoint = false
          this.host.resume()
          return
        }
        // A batch under way may have committed after the checkpoint looked.
        const active = this.host.batchActive()
        const behind = result.checkpointed < result.log || this.commitsSinceCheckpoint > 0 || active
        if (!behind || this.host.stopped()) return
        this.waitingForCheckpoint = true
        if (!active) this.maybeCheckpoint()
      },
      () => {
        // A failed checkpoint costs only a longer WAL; the next commits ask again.
        this.waitingForCheckpoint = false
        this.host.resume()
      },
    )
  }
}
