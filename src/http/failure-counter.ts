/** One key's count within its window. */
interface Window {
  count: number
  endsAt: number
}

/** A hit's outcome: the key's count in its window and when that ends, or `full`. */
export type Hit = { count: number; endsInMs: number } | { full: true; endsInMs: number }

/**
 * Counts per key in fixed windows (from a key's first hit), for at most `capacity` keys at once.
 * A key is never forgotten before its window ends: while every place holds a live window, a new
 * key is not counted but told `full`, with the time until the oldest window ends. Map order is
 * window order (a key whose window ended is inserted again), so ended windows are at the front and
 * each is swept once: a hit costs O(1) amortised.
 */
export class FailureCounter {
  private readonly windows = new Map<string, Window>()

  constructor(
    private readonly capacity: number,
    private readonly windowMs: number,
  ) {}

  hit(key: string, now = Date.now()): Hit {
    let window = this.windows.get(key)
    if (window && window.endsAt <= now) {
      this.windows.delete(key)
      window = undefined
    }
    if (!window) {
      this.sweep(now)
      const oldest = this.windows.values().next().value
      if (oldest && this.windows.size >= this.capacity) return { full: true, endsInMs: oldest.endsAt - now }
      window = { count: 0, endsAt: now + this.windowMs }
      this.windows.set(key, window)
    }
    window.count++
    return { count: window.count, endsInMs: window.endsAt - now }
  }

  /** Keys counted now. */
  get size(): number {
    return this.windows.size
  }

  private sweep(now: number): void {
    for (const [key, window] of this.windows) {
      if (window.endsAt > now) return
      this.windows.delete(key)
    }
  }
}
