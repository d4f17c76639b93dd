/**
 * When the writer's WAL is copied into the database file, and when writes wait so that the WAL can
 * start over from its beginning. The copies themselves run in the checkpointer thread.
 */
import { CheckpointFailure, Checkpointer, type CheckpointerOptions } from './checkpointer.js'

/**
 * Commits after which the checkpointer copies the WAL into the database file, while writes go on.
 * SQLite reuses the WAL from its start only when a transaction begins with every frame copied,
 * which a busy writer would never allow; so writes then wait for one more checkpoint (RESTART) of
 * the few frames committed meanwhile. Overwriting a WAL already on disk (a few hundred frames with
 * sequential ids, about 7,500 with random ones) keeps each fsync cheap; appending to an ever longer
 * one makes every sync update the file's size as well.
 */
const CHECKPOINT_EVERY_COMMITS = 100

/**
 * Writes are held for the RESTART only once a passive checkpoint ran while at most this many
 * commits landed; until then passive checkpoints follow each other (up to CATCH_UP_PASSES more),
 * each copying, and syncing, what landed during the one before. The hold lasts as long as the
 * RESTART's copy and sync of what is left, and on a 10M-plant store with random ids a first pass
 * leaves over a thousand pages.
 */
const HOLD_AFTER_COMMITS = 1
const CATCH_UP_PASSES = 3

/** What the recycler needs to know of the writer, and how it lets writes go on. */
export interface RecyclerHost {
  /** A batch is between BEGIN and its answers: it may commit after a checkpoint looked. */
  batchActive(): boolean
  /** The writer is closing or broken: no more checkpoints are asked for. */
  stopped(): boolean
  /** Writes held for a RESTART checkpoint may go on. */
  resume(): void
  /** A checkpoint's write or sync of the database file failed: see maybeCheckpoint. */
  databaseFileFailed(error: Error): void
}

/** What the recycler uses of the checkpointer thread's handle (tests give it a scripted one). */
export type CheckpointRunner = Pick<Checkpointer, 'checkpoint' | 'running' | 'close'>

export class WalRecycler {
  private readonly checkpointer: CheckpointRunner
  private commitsSinceCheckpoint = 0
  private waitingForCheckpoint = false
  private catchUpPasses = 0
  private finished = 0

  constructor(
    options: CheckpointerOptions,
    private readonly host: RecyclerHost,
    // Its thread starts with the first checkpoint, not here: loading it beside the service's own
    // start made start to ready 100-150 ms longer on one core.
    checkpointer?: CheckpointRunner,
  ) {
    const { path, synchronous, coalesceWalWrites } = options
    this.checkpointer = checkpointer ?? new Checkpointer({ path, synchronous, coalesceWalWrites })
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
    const due =
      this.commitsSinceCheckpoint >= CHECKPOINT_EVERY_COMMITS ||
      this.waitingForCheckpoint ||
      this.catchUpPasses > 0
    if (!due || this.checkpointer.running || this.host.stopped()) return
    this.commitsSinceCheckpoint = 0
    this.checkpointer.checkpoint(this.waitingForCheckpoint ? 'RESTART' : 'PASSIVE').then(
      (result) => {
        this.finished++
        if (this.waitingForCheckpoint) {
          // The RESTART ran with no write in between; whatever it achieved, writes go on (a
          // reader in another process can keep any checkpoint from catching up).
          this.waitingForCheckpoint = false
          this.host.resume()
          return
        }
        // A batch under way may have committed after the checkpoint looked.
        const active = this.host.batchActive()
        const behind = result.checkpointed < result.log || this.commitsSinceCheckpoint > 0 || active
        if (!behind || this.host.stopped()) {
          this.catchUpPasses = 0
          return
        }
        const landed = this.commitsSinceCheckpoint + (active ? 1 : 0)
        if (landed > HOLD_AFTER_COMMITS && this.catchUpPasses < CATCH_UP_PASSES) {
          this.catchUpPasses++
          this.maybeCheckpoint()
          return
        }
        this.catchUpPasses = 0
        this.waitingForCheckpoint = true
        if (!active) this.maybeCheckpoint()
      },
      (error: unknown) => {
        this.catchUpPasses = 0
        this.waitingForCheckpoint = false
        // After a failed write or sync the kernel may drop the copied pages, and a later sync can
        // succeed without them; the WAL, which still holds them, must then never start over. The
        // host stops writes until a restart, whose recovery copies the whole WAL again. Any other
        // failure (the thread died, say) costs only a longer WAL: the next commits ask again.
        if (error instanceof CheckpointFailure && error.code?.startsWith('SQLITE_IOERR'))
          this.host.databaseFileFailed(error)
        this.host.resume()
      },
    )
  }
}
