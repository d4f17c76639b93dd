import { type CommitObserver, type CreateOutcome, type Plant, StoreUnavailableError } from '../storage.js'
import { LoadMeter } from './load-meter.js'

export interface CreateRequest {
  plant: Plant
}

interface Waiting extends CreateRequest {
  resolve: (outcome: CreateOutcome) => void
  reject: (error: unknown) => void
  /** When it was submitted (Date.now()). */
  since: number
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
   * `maxWaitMs` bounds how long a create waits for its answer from the moment it is submitted:
   * one queued behind a batch that the server does not answer (frozen, cut off) got its 503 only
   * after that batch's deadline and then its own, twice the documented time. One still queued at
   * its deadline is answered 503 unsent, so not stored.
   */
  constructor(
    private readonly runBatch: (batch: CreateRequest[]) => Promise<CreateOutcome[]>,
    private readonly maxInFlight: number,
    private readonly maxBatch: number,
    private readonly maxWaitMs: number,
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

  submit(plant: Plant): Promise<CreateOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ plant, resolve, reject, since: Date.now() })
      this.schedule()
      this.watchQueue()
    })
  }

  /** One timer, for the oldest create still queued; it is usually sent long before. */
  private watchQueue(): void {
    const oldest = this.queue[0]
    if (this.expiry || !oldest) return
    const due = Math.max(0, oldest.since + this.maxWaitMs - Date.now())
    this.expiry = setTimeout(() => {
      this.expiry = undefined
      this.expireWaiting()
      this.watchQueue()
    }, due)
    this.expiry.unref()
  }

  private expireWaiting(): void {
    const now = Date.now()
    const expired = this.queue.filter((waiting) => now - waiting.since >= this.maxWaitMs)
    if (expired.length === 0) return
    this.queue = this.queue.filter((waiting) => now - waiting.since < this.maxWaitMs)
    for (const waiting of expired) waiting.reject(this.tooLate())
  }

  private tooLate(): StoreUnavailableError {
    return new StoreUnavailableError(`PostgreSQL did not answer this create within ${this.maxWaitMs} ms`)
  }

  // On the next turn of the event loop, so that the creates of this one travel together.
  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.limit() || this.queue.length === 0) return
    this.scheduled = true
    setImmediate(() => this.flush())
  }

  private flush(): void {
    this.scheduled = false
    const oldest = this.queue[0]
    if (oldest && Date.now() - oldest.since >= this.maxWaitMs) this.expireWaiting()
    while (this.queue.length > 0 && this.inFlight < this.limit()) {
      const batch = this.take()
      // Everything queued repeats an id still running; its batch's end schedules the next flush.
      if (batch.length === 0) return
      this.inFlight++
      const started = performance.now()
      // Answered by the oldest create's deadline at the latest, however long it queued; the
      // statement may still commit afterwards, as after any lost answer (creates are idempotent).
      let answered = false
      const answer = (give: () => void) => {
        if (answered) return
        answered = true
        clearTimeout(late)
        give()
      }
      const late = setTimeout(
        () => answer(() => batch.forEach((waiting) => waiting.reject(this.tooLate()))),
        Math.max(0, (batch[0] as Waiting).since + this.maxWaitMs - Date.now()),
      ).unref()
      this.runBatch(batch)
        .then(
          (outcomes) => {
            this.observer?.batchCommitted(batch.length, performance.now() - started)
            answer(() => batch.forEach((waiting, i) => waiting.resolve(outcomes[i] as CreateOutcome)))
          },
          (error: unknown) => answer(() => batch.forEach((waiting) => waiting.reject(error))),
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
