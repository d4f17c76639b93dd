import type { CreateOutcome, Plant } from '../storage.js'
import { LoadMeter } from './load-meter.js'

export interface CreateRequest {
  plant: Plant
  payload: string
}

interface Waiting extends CreateRequest {
  resolve: (outcome: CreateOutcome) => void
  reject: (error: unknown) => void
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

  constructor(
    private readonly runBatch: (batch: CreateRequest[]) => Promise<CreateOutcome[]>,
    private readonly maxInFlight: number,
    private readonly maxBatch: number,
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

  submit(plant: Plant, payload: string): Promise<CreateOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ plant, payload, resolve, reject })
      this.schedule()
    })
  }

  // On the next turn of the event loop, so that the creates of this one travel together.
  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.limit() || this.queue.length === 0) return
    this.scheduled = true
    setImmediate(() => this.flush())
  }

  private flush(): void {
    this.scheduled = false
    while (this.queue.length > 0 && this.inFlight < this.limit()) {
      const batch = this.take()
      // Everything queued repeats an id still running; its batch's end schedules the next flush.
      if (batch.length === 0) return
      this.inFlight++
      this.runBatch(batch)
        .then(
          (outcomes) => batch.forEach((waiting, i) => waiting.resolve(outcomes[i] as CreateOutcome)),
          (error: unknown) => batch.forEach((waiting) => waiting.reject(error)),
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
