import type { FastifyRequest } from 'fastify'

const unrouted = Symbol('refused before routing')
type Marked = FastifyRequest & { [unrouted]?: true }

/**
 * Marks a request refused by a check that runs before its route's own (no route, 405, Host,
 * framing): the metrics count all of them under one route label, whatever path they named.
 */
export function refuseBeforeRouting(request: FastifyRequest, error: Error): Error {
  ;(request as Marked)[unrouted] = true
  return error
}

export const refusedBeforeRouting = (request: FastifyRequest): boolean =>
  (request as Marked)[unrouted] === true
