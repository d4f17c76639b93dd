import underPressure from '@fastify/under-pressure'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Config } from '../config.js'
import { ApiError } from '../errors.js'
import { noteRefusal } from './refusals.js'

/** Seconds a shed client is asked to wait: a few sampling intervals of the measures below. */
const RETRY_AFTER_S = 5

/**
 * Routes never shed: the liveness probe must say the process is up while it sheds (a restart would
 * only lose the work in flight), and the OpenAPI document is a cached constant.
 */
const NEVER_SHED = new Set(['/healthz', '/openapi.json'])

/**
 * Load shedding with @fastify/under-pressure: once a second it samples the event loop's mean delay
 * and the heap in use; while one is past its threshold every request but NEVER_SHED's is answered
 * 503 in the Error shape with Retry-After, before any work (authentication included) is done.
 */
export async function registerLoadShedding(app: FastifyInstance, config: Config): Promise<void> {
  await app.register(underPressure, {
    maxEventLoopDelay: config.loadShedEventLoopDelayMs,
    maxHeapUsedBytes: config.loadShedHeapMb * 1024 * 1024,
    pressureHandler: async (request: FastifyRequest, _reply, type) => {
      if (NEVER_SHED.has(request.routeOptions.url ?? '')) return
      noteRefusal('load-shed')
      const what = type === 'eventLoopDelay' ? 'its event loop lags' : 'its memory is nearly full'
      throw new ApiError('OVERLOADED', `the service is overloaded (${what}); retry later`, {
        headers: { 'retry-after': String(RETRY_AFTER_S) },
      })
    },
  })
}
