import type { FastifyInstance, HTTPMethods, onRequestHookHandler } from 'fastify'
import { ApiError } from '../errors.js'
import { refuseBeforeRouting } from '../observability/route-label.js'

/** A route pattern (`/plants/:id`) and the methods its 405 lists in Allow. */
export interface KnownPath {
  url: string
  allow: readonly string[]
}

/** A route pattern as the OpenAPI document and docs/api.md write it, for messages: `/plants/{id}`. */
export const shownPath = (url: string) => url.replace(/:(\w+)/g, '{$1}')

/**
 * Fastify answers 404 for a known path with an unknown method; RFC 9110 wants 405 with Allow.
 * The answer is given in onRequest, before the body is read: a PUT with a bad or oversized body
 * is a 405, not a 415 or 413 for a body no route would take. These catch-all routes are hidden
 * from the document: they are not operations. The path and its Allow list are returned for the
 * CONNECT answer, which no route can give.
 */
export function methodNotAllowed(app: FastifyInstance, url: string, allowed: HTTPMethods[]): KnownPath {
  const allow = allowed.includes('GET') && !allowed.includes('HEAD') ? [...allowed, 'HEAD'] : allowed
  const others = app.supportedMethods.filter((method) => !allow.includes(method as HTTPMethods))
  const refuse: onRequestHookHandler = (request, _reply, done) =>
    done(
      refuseBeforeRouting(
        request,
        new ApiError(
          'METHOD_NOT_ALLOWED',
          `${request.method} is not allowed on ${shownPath(url)}; use ${allow.join(', ')}`,
          {
            headers: { allow: allow.join(', ') },
          },
        ),
      ),
    )
  app.route({
    method: others,
    url,
    schema: { hide: true },
    onRequest: refuse,
    handler: async () => {
      throw new Error('unreachable: the onRequest hook answers every request of this route')
    },
  })
  return { url, allow }
}
