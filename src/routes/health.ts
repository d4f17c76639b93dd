import type { FastifyInstance } from 'fastify'
import { ApiError } from '../errors.js'
import { errorResponses } from '../schemas/error.js'
import { type Storage, StoreReadOnlyError, StoreWriteError } from '../storage/storage.js'

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
        tags: ['service'],
        summary: 'Liveness: the process is up',
        description: 'Answers 200 while the process runs, whatever the store does; needs no token.',
        security: [],
        response: {
          200: { ...Health, description: 'Alive', examples: [{ status: 'ok' }] },
          ...errorResponses(),
        },
      },
    },
    async () => ({ status: 'ok' }),
  )
  app.get(
    '/readyz',
    {
      schema: {
        operationId: 'readyz',
        tags: ['service'],
        summary: 'Readiness: the store answers',
        description:
          'Answers 200 once the store answers a query, 503 with Retry-After while it does not; needs no token.',
        security: [],
        response: {
          200: { ...Health, description: 'Ready', examples: [{ status: 'ready', store: 'sqlite' }] },
          ...errorResponses(503),
        },
      },
    },
    async (request) => {
      try {
        await storage.ping()
      } catch (error) {
        // The cause goes to the log only: this endpoint is public, and connection errors name hosts.
        request.log.warn({ err: error }, 'not ready')
        const reason =
          error instanceof StoreReadOnlyError
            ? 'accepts no writes'
            : error instanceof StoreWriteError
              ? 'could not write just now'
              : 'does not answer, or cannot read its plants'
        throw new ApiError('STORE_UNAVAILABLE', `the ${storage.kind} store ${reason}`, {
          headers: { 'retry-after': '5' },
        })
      }
      return { status: 'ready', store: storage.kind }
    },
  )
}
