/**
 * Reads that arrive in the same turn of the event loop go to PostgreSQL as one statement: one
 * round trip, one write and one backend wake-up for all of them, where a query per read paid a
 * socket write each (the largest cost per read in a CPU profile). Identical reads in a turn share
 * one answer. A read never joins a statement already sent, so it always sees every write that was
 * answered before it arrived.
 */
export class ReadBatcher<K, V> {
  private pending = new Map<
    string,
    { key: K; waiters: { resolve: (value: V) => void; reject: (error: unknown) => void }[] }
  >()
  private scheduled = false

  constructor(
    /** Answers `keys` (distinct), one value per key in the same order. */
    private readonly run: (keys: K[]) => Promise<V[]>,
    private readonly idOf: (key: K) => string,
    private readonly maxBatch: number,
  ) {}

  get(key: K): Promise<V> {
    return new Promise((resolve, reject) => {
      const id = this.idOf(key)
      let entry = this.pending.get(id)
      if (!entry) {
        entry = { key, waiters: [] }
        this.pending.set(id, entry)
      }
      entry.waiters.push({ resolve, reject })
      if (this.pending.size >= this.maxBatch) this.flush()
      else if (!this.scheduled) {
        this.scheduled = true
        setImmediate(() => this.flush())
      }
    })
  }

  private flush(): void {
    this.scheduled = false
    if (this.pending.size === 0) return
    const entries = [...this.pending.values()]
    this.pending = new Map()
    this.run(entries.map((entry) => entry.key)).then(
      (values) =>
        entries.forEach((entry, i) => {
          for (const waiter of entry.waiters) waiter.resolve(values[i] as V)
        }),
      (error: unknown) =>
        entries.forEach((entry) => {
          for (const waiter of entry.waiters) waiter.reject(error)
        }),
    )
  }
}
