import type { FastifyInstance } from 'fastify'
import { ApiError } from '../errors.js'
import { errorResponses } from '../schemas/error.js'
import type { Storage } from '../storage/storage.js'

const Health = {
  type: 'object',
  required: ['status'],
  properties: { status: { type: 'string' }, store: { type: 'string' } },
}

/** Public probes: /healthz says the process is up, /readyz that the store answers. */
export function healthRoutes(app: FastifyInstance, storage: Storage): void {
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'healthz',
        summary: 'Liveness: the process is up',
        security: [],
        response: { 200: { ...Health, description: 'Alive' } },
      },
    },
    async () => ({ status: 'ok' }),
  )
  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'readyz',
        summary: 'Readiness: the store answers',
        security: [],
        response: { 200: { ...Health, description: 'Ready' }, ...errorResponses(503) },
      },
    },
    async () => {
      try {
        await storage.ping()
      } catch {
        throw new ApiError('STORE_UNAVAILABLE', `the ${storage.kind} store does not answer`, {
          headers: { 'retry-after': '5' },
        })
      }
      return { status: 'ready', store: storage.kind }
    },
  )
}
