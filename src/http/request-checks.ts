import type { FastifyInstance, FastifyReply, FastifyRequest, preParsingHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'
import { ApiError } from '../errors.js'
import { named } from '../hook-order.js'
import { refuseBeforeRouting } from '../observability/route-label.js'
import { limitConnections } from './connection-limits.js'
import { hostRefusal } from './host-header.js'
import { loadShedding } from './load-shedding.js'
import { framingRefusal } from './message-framing.js'
import { badQueryEncoding } from './query-encoding.js'

/** The 404 of a path the API does not have, counted under the one no-route label. */
export const routeNotFound = (request: FastifyRequest): Error =>
  refuseBeforeRouting(
    request,
    new ApiError('ROUTE_NOT_FOUND', `no route for ${request.method} ${request.url.split('?')[0]}`),
  )

/**
 * The checks every request passes before its route's own, in one onRequest hook that reads only
 * the request head: a connection over a cap, load shedding, the framing, the Host; and in one
 * preParsing hook, after authentication, the last checks before a body is read: an unknown path is
 * answered there, its body unread (only POST /plants sends the 100 Continue a client may be
 * waiting for before it sends one), and so is a badly encoded query.
 */
function requestChecks(app: FastifyInstance, { config }: { config: Config }, next: () => void): void {
  const connectionRefusal = limitConnections(app, {
    max: config.maxConnections,
    perAddress: config.maxConnectionsPerAddress,
    trustProxy: config.trustProxy,
  })
  const shed = loadShedding(app, config)
  const checkHead = (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void) =>
    done(connectionRefusal(request) ?? shed?.(request) ?? framingRefusal(request) ?? hostRefusal(request))
  const checkTarget: preParsingHookHandler = (request, _reply, payload, done) => {
    if (request.is404) return done(routeNotFound(request))
    const badQuery = badQueryEncoding(request.url)
    if (badQuery) return done(badQuery)
    done(null, payload)
  }
  app.addHook('onRequest', named(app, 'request-checks: head', checkHead))
  app.addHook('preParsing', named(app, 'request-checks: route and query', checkTarget))
  next()
}

export default fp(requestChecks, { name: 'request-checks', dependencies: ['protocol', 'observability'] })
