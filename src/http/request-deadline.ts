import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { named } from '../hook-order.js'
import { inRequest } from '../storage/request-scope.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Date.now() when the request arrived: the start of its store deadline (storage/request-scope.ts). */
    receivedAt: number
  }
}

/**
 * Gives each request one store deadline, from its arrival (storage/request-scope.ts). Entered on
 * onRequest, before the token lookup, and again on preHandler, because reading a body runs its
 * callbacks outside the context. Registered only for the PostgreSQL store, whose calls wait on a
 * network; it costs two AsyncLocalStorage.run calls per request.
 */
function requestDeadline(app: FastifyInstance, _options: unknown, next: () => void): void {
  app.decorateRequest('receivedAt', 0)
  app.addHook(
    'onRequest',
    named(app, 'request-deadline: start', (request, _reply, done) => {
      request.receivedAt = Date.now()
      inRequest(request.receivedAt, done)
    }),
  )
  app.addHook(
    'preHandler',
    named(app, 'request-deadline: enter', (request, _reply, done) => {
      inRequest(request.receivedAt, done)
    }),
  )
  next()
}

export default fp(requestDeadline, { name: 'request-deadline', dependencies: ['observability'] })
