import { type CommitObserver, type CreateOutcome, type Plant, StoreUnavailableError } from '../storage.js'
import { LoadMeter } from './load-meter.js'

export interface CreateRequest {
  plant: Plant
}

interface Waiting extends CreateRequest {
  resolve: (outcome: CreateOutcome) => void
  reject: (error: unknown) => void
  /** When its answer is due at the latest (Date.now() time): its request's store deadline. */
  until: number
}

/**
 * Group commit for PostgreSQL: creates that arrive together go to the server as one statement,
 * hence one transaction, one round trip and one WAL flush, and every one of them is answered
 * only once that statement has committed (or fails with it). At most `maxInFlight` batch
 * statements run at once (one while the process is busy: see `limit`); creates arriving meanwhile
 * queue up and form the next batch, so the busier the service, the larger the batches.
 *
 * An id is in at most one running batch, once. A repeat waits until the batch holding the first
 * one has finished, and then meets its row, exactly as if it had arrived after it.
 */
export class CreateBatcher {
  private queue: Waiting[] = []
  private scheduled = false
  private inFlight = 0
  private readonly idsInFlight = new Set<bigint>()
  private readonly loadMeter = new LoadMeter()
  private expiry: NodeJS.Timeout | undefined

  /**
   * Each create is answered by its `until` (submit): one queued behind a batch that the server does
   * not answer (frozen, cut off) got its 503 only after that batch's deadline and then its own,
   * twice the documented time. One still queued at its deadline is answered 503 unsent, so not
   * stored. A batch runs until the latest deadline among its creates (`runBatch`'s `until`).
   */
  constructor(
    private readonly runBatch: (batch: CreateRequest[], until: number) => Promise<CreateOutcome[]>,
    private readonly maxInFlight: number,
    private readonly maxBatch: number,
    private readonly observer?: CommitObserver,
  ) {}

  /**
   * More than one batch in flight only hides the round trip while this process waits for the
   * database. When its own CPU is the limit (the event loop busy, or sharing a core with the
   * database), a second batch only splits the same creates into more, smaller statements, each
   * paying its own commit and round trip (and, under about 10 creates, its own planning); so then
   * one runs at a time.
   */
  private limit(): number {
    return this.loadMeter.busy() ? 1 : this.maxInFlight
  }

  submit(plant: Plant, until: number): Promise<CreateOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ plant, resolve, reject, until })
      this.schedule()
      this.watchQueue()
    })
  }

  /** One timer, for the oldest create still queued; it is usually sent long before. */
  private watchQueue(): void {
    if (this.expiry || this.queue.length === 0) return
    const due = Math.max(0, Math.min(...this.queue.map((waiting) => waiting.until)) - Date.now())
    this.expiry = setTimeout(() => {
      this.expiry = undefined
      this.expireWaiting()
      this.watchQueue()
    }, due)
    this.expiry.unref()
  }

  private expireWaiting(): void {
    const now = Date.now()
    const expired = this.queue.filter((waiting) => waiting.until <= now)
    if (expired.length === 0) return
    this.queue = this.queue.filter((waiting) => waiting.until > now)
    for (const waiting of expired) waiting.reject(tooLate())
  }

  // On the next turn of the event loop, so that the creates of this one travel together.
  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.limit() || this.queue.length === 0) return
    this.scheduled = true
    setImmediate(() => this.flush())
  }

  private flush(): void {
    this.scheduled = false
    this.expireWaiting()
    while (this.queue.length > 0 && this.inFlight < this.limit()) {
      const batch = this.take()
      // Everything queued repeats an id still running; its batch's end schedules the next flush.
      if (batch.length === 0) return
      this.inFlight++
      const started = performance.now()
      // Each create is answered by its own deadline at the latest, however long it queued; the
      // statement may still commit afterwards, as after any lost answer (creates are idempotent).
      const open = new Set(batch)
      let late: NodeJS.Timeout | undefined
      const expire = () => {
        const now = Date.now()
        for (const waiting of open) {
          if (waiting.until > now) continue
          open.delete(waiting)
          waiting.reject(tooLate())
        }
        if (open.size > 0) late = setTimeout(expire, Math.min(...[...open].map((w) => w.until)) - now).unref()
      }
      expire()
      const answer = (give: (waiting: Waiting, i: number) => void) => {
        clearTimeout(late)
        batch.forEach((waiting, i) => {
          if (open.delete(waiting)) give(waiting, i)
        })
      }
      this.runBatch(batch, Math.max(...batch.map((waiting) => waiting.until)))
        .then(
          (outcomes) => {
            this.observer?.batchCommitted(batch.length, performance.now() - started)
            answer((waiting, i) => waiting.resolve(outcomes[i] as CreateOutcome))
          },
          (error: unknown) => answer((waiting) => waiting.reject(error)),
        )
        .finally(() => {
          for (const waiting of batch) this.idsInFlight.delete(waiting.plant.id)
          this.inFlight--
          this.schedule()
        })
    }
  }

  private take(): Waiting[] {
    const batch: Waiting[] = []
    const later: Waiting[] = []
    for (const waiting of this.queue) {
      if (batch.length < this.maxBatch && !this.idsInFlight.has(waiting.plant.id)) {
        this.idsInFlight.add(waiting.plant.id)
        batch.push(waiting)
      } else later.push(waiting)
    }
    this.queue = later
    return batch
  }
}

function tooLate(): StoreUnavailableError {
  return new StoreUnavailableError("PostgreSQL did not answer this create within its request's deadline")
}
