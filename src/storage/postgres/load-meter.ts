import { type EventLoopUtilization, performance } from 'node:perf_hooks'

/**
 * Event-loop utilisation that makes the process count as busy, and the lower one that ends it (a
 * band, so that a window or two either side of one value does not flip it back and forth).
 * Measured with 64 connections creating plants: 0.87-1.00 with PostgreSQL on the same core
 * (the CPU is the limit), 0.37-0.82 with a 2 ms round trip to it (the wait is).
 */
const BUSY_ABOVE = 0.85
const IDLE_BELOW = 0.7
/** How often the utilisation is sampled: long enough to smooth single turns, short to follow load. */
const SAMPLE_MS = 100

/** Whether this process's event loop has been mostly busy lately. */
export class LoadMeter {
  private window: EventLoopUtilization = performance.eventLoopUtilization()
  private sampledAt = performance.now()
  private isBusy = false

  busy(): boolean {
    const now = performance.now()
    if (now - this.sampledAt >= SAMPLE_MS) {
      const current = performance.eventLoopUtilization()
      const { utilization } = performance.eventLoopUtilization(current, this.window)
      if (utilization > BUSY_ABOVE) this.isBusy = true
      else if (utilization < IDLE_BELOW) this.isBusy = false
      this.window = current
      this.sampledAt = now
    }
    return this.isBusy
  }
}
