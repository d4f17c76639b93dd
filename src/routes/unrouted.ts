import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { answerConnect } from './connect.js'
import { methodNotAllowed } from './method-not-allowed.js'

/**
 * The answers for what no route takes: a method a known path does not take (405 with Allow), and
 * CONNECT, which Node hands to the server instead of a route. Registered last: it lists the paths
 * the route plugins before it declared.
 */
function unrouted(
  app: FastifyInstance,
  { servesMetrics }: { servesMetrics: boolean },
  next: () => void,
): void {
  answerConnect(app, [
    methodNotAllowed(app, '/plants', ['GET', 'POST']),
    methodNotAllowed(app, '/plants/:id', ['GET', 'DELETE']),
    methodNotAllowed(app, '/openapi.json', ['GET']),
    methodNotAllowed(app, '/healthz', ['GET']),
    methodNotAllowed(app, '/readyz', ['GET']),
    ...(servesMetrics ? [methodNotAllowed(app, '/metrics', ['GET'])] : []),
  ])
  next()
}

export default fp(unrouted, { name: 'routes-unrouted', dependencies: ['contract'] })
