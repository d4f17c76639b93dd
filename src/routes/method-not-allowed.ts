import type { FastifyInstance, HTTPMethods } from 'fastify'
import { ApiError } from '../errors.js'

const METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

/**
 * Fastify answers 404 for a known path with an unknown method; RFC 9110 wants 405 with Allow.
 * These catch-all routes are hidden from the document: they are not operations.
 */
export function methodNotAllowed(app: FastifyInstance, url: string, allowed: HTTPMethods[]): void {
  const allow = allowed.includes('GET') && !allowed.includes('HEAD') ? [...allowed, 'HEAD'] : allowed
  const others = METHODS.filter((method) => !allow.includes(method))
  app.route({
    method: others,
    url,
    schema: { hide: true },
    handler: async (request) => {
      throw new ApiError(
        'METHOD_NOT_ALLOWED',
        `${request.method} is not allowed on ${url}; use ${allow.join(', ')}`,
        {
          headers: { allow: allow.join(', ') },
        },
      )
    },
  })
}
