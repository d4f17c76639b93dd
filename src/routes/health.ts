import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { ApiError } from '../errors.js'
import { errorResponses } from '../schemas/error.js'
import { type Storage, StoreReadOnlyError, StoreStoppedError, StoreWriteError } from '../storage/storage.js'

const Health = {
  type: 'object',
  required: ['status'],
  properties: { status: { type: 'string' }, store: { type: 'string' } },
}

const Ready = {
  ...Health,
  properties: {
    ...Health.properties,
    details: {
      type: 'object',
      description: "Figures of the store's (SQLite only; absent for PostgreSQL)",
      properties: {
        walBytes: {
          type: 'integer',
          description: "Bytes in SQLite's WAL: near 4 MiB under steady writes, checkpointed back to 0",
        },
      },
    },
  },
}

/** Why /readyz says 503, in words safe for a public endpoint. */
function notReadyReason(error: unknown): string {
  if (error instanceof StoreStoppedError)
    return `stopped taking writes (${error.reason}); restart the service`
  if (error instanceof StoreReadOnlyError) return 'accepts no writes'
  if (error instanceof StoreWriteError) return 'could not write just now'
  return 'does not answer, or cannot read its plants'
}

/** Public probes: /healthz says the process is up, /readyz that the store answers. */
function health(app: FastifyInstance, { storage }: { storage: Storage }, next: () => void): void {
  app.get(
    '/healthz',
    {
      schema: {
        operationId: 'healthz',
        tags: ['service'],
        summary: 'Liveness: the process is up',
        description:
          'Answers 200 while the process runs, whatever the store does; needs no token. Like every route, 503 TOO_MANY_CONNECTIONS on a connection over a connection cap.',
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
          200: {
            ...Ready,
            description: 'Ready',
            examples: [{ status: 'ready', store: 'sqlite', details: { walBytes: 1_650_112 } }],
          },
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
        throw new ApiError('STORE_UNAVAILABLE', `the ${storage.kind} store ${notReadyReason(error)}`, {
          headers: { 'retry-after': '5' },
        })
      }
      const details = storage.details?.()
      return details
        ? { status: 'ready', store: storage.kind, details }
        : { status: 'ready', store: storage.kind }
    },
  )
  next()
}

export default fp(health, { name: 'routes-health', dependencies: ['contract'] })
