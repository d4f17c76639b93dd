import type { FastifyInstance } from 'fastify'
import { inRequest } from '../storage/request-scope.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Date.now() when the request arrived: the start of its store deadline (storage/request-scope.ts). */
    receivedAt: number
  }
}

/**
 * Gives each request one store deadline, from its arrival (storage/request-scope.ts). Entered on
 * onRequest, for the token lookup, and again on preHandler, because reading a body runs its
 * callbacks outside the context. Costs two AsyncLocalStorage.run calls per request; installed only
 * for the PostgreSQL store, the one whose calls wait on a network.
 */
export function installRequestDeadline(app: FastifyInstance): void {
  app.decorateRequest('receivedAt', 0)
  app.addHook('onRequest', (request, _reply, done) => {
    request.receivedAt = Date.now()
    inRequest(request.receivedAt, done)
  })
  app.addHook('preHandler', (request, _reply, done) => {
    inRequest(request.receivedAt, done)
  })
}
