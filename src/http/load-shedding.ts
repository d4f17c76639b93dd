import { monitorEventLoopDelay } from 'node:perf_hooks'
import { getHeapStatistics } from 'node:v8'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Config } from '../config.js'
import { ApiError } from '../errors.js'
import { countSampleFailure } from '../observability/metrics.js'
import { noteRefusal } from './refusals.js'

/** Seconds a shed client is asked to wait: a few sampling intervals of the measures below. */
const RETRY_AFTER_S = 5

/** How often the event loop's delay and the heap are sampled. */
const SAMPLE_MS = 1000

/** The delay histogram's resolution; its mean is at least this on an idle loop. */
const RESOLUTION_MS = 10

/**
 * Routes never shed: the liveness probe must say the process is up while it sheds (a restart would
 * only lose the work in flight), and the OpenAPI document is a cached constant.
 */
const NEVER_SHED = new Set(['/healthz', '/openapi.json'])

/** The last sample, and what takes one. */
export interface PressureSample {
  eventLoopDelayMs: number
  heapUsedBytes: number
}

/**
 * Samples the event loop's mean delay and the heap in use; never throws. The heap comes from V8's
 * statistics, which need no descriptor: `process.memoryUsage()` reads /proc/self/stat and throws
 * EMFILE when the process has none left, which killed it inside @fastify/under-pressure's timer
 * (https://github.com/fastify/under-pressure/blob/v9.2.0/index.js#L194, no upstream issue). A
 * failed sample keeps the previous values, and is counted and logged.
 */
export class PressureSampler {
  readonly last: PressureSample = { eventLoopDelayMs: 0, heapUsedBytes: 0 }
  failures = 0
  private readonly histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS })

  constructor(
    private readonly onFailure: (error: unknown) => void,
    private readonly heapUsed: () => number = () => getHeapStatistics().used_heap_size,
  ) {
    this.histogram.enable()
  }

  sample(): void {
    try {
      const mean = this.histogram.mean / 1e6
      // No sample at all in an interval: the loop was blocked for all of it.
      this.last.eventLoopDelayMs = Number.isNaN(mean) ? Infinity : Math.max(0, mean - RESOLUTION_MS)
      this.histogram.reset()
      this.last.heapUsedBytes = this.heapUsed()
    } catch (error) {
      this.failures++
      this.onFailure(error)
    }
  }

  stop(): void {
    this.histogram.disable()
  }
}

/**
 * Load shedding: once a second PressureSampler samples the event loop's mean delay and the heap
 * in use; while one is past its threshold every request but NEVER_SHED's is answered 503 in the
 * Error shape with Retry-After, before any work (authentication included) is done. Returns that
 * check (http/request-checks.ts runs it), which costs two comparisons per request, or undefined
 * when both thresholds are 0.
 */
export function loadShedding(
  app: FastifyInstance,
  config: Config,
): ((request: FastifyRequest) => ApiError | undefined) | undefined {
  const maxDelayMs = config.loadShedEventLoopDelayMs
  const maxHeapBytes = config.loadShedHeapMb * 1024 * 1024
  if (maxDelayMs === 0 && maxHeapBytes === 0) return undefined
  const sampler = new PressureSampler((error) => {
    countSampleFailure()
    app.log.warn({ err: error }, 'load shedding could not take its sample; it keeps the previous one')
  })
  const timer = setInterval(() => sampler.sample(), SAMPLE_MS).unref()
  app.addHook('onClose', (_app, done) => {
    clearInterval(timer)
    sampler.stop()
    done()
  })
  return (request) => {
    const { eventLoopDelayMs, heapUsedBytes } = sampler.last
    const lags = maxDelayMs > 0 && eventLoopDelayMs > maxDelayMs
    const full = maxHeapBytes > 0 && heapUsedBytes > maxHeapBytes
    if ((!lags && !full) || NEVER_SHED.has(request.routeOptions.url ?? '')) return undefined
    noteRefusal('load-shed')
    const what = lags ? 'its event loop lags' : 'its memory is nearly full'
    return new ApiError('OVERLOADED', `the service is overloaded (${what}); retry later`, {
      headers: { 'retry-after': String(RETRY_AFTER_S) },
    })
  }
}
