import cors, { type FastifyCorsOptions } from '@fastify/cors'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { isPlantsPath } from './security-headers.js'

/**
 * CORS for browsers calling /plants from the CORS_ORIGINS origins (`*`: any); not registered at
 * all when there are none, so nothing changes then. Credentials stay off: the API takes bearer
 * tokens, never cookies. An OPTIONS that is not a preflight (no Origin or no
 * Access-Control-Request-Method), or on another path, keeps its usual answer (405, 404).
 */
export async function registerCors(app: FastifyInstance, origins: readonly string[]): Promise<void> {
  if (origins.length === 0) return
  const enabled: FastifyCorsOptions = {
    origin: origins.includes('*') ? '*' : [...origins],
    methods: ['GET', 'HEAD', 'POST', 'DELETE'],
    allowedHeaders: ['Authorization', 'Content-Type', 'X-Request-Id'],
    exposedHeaders: ['Link', 'Retry-After', 'WWW-Authenticate', 'X-Request-Id'],
    maxAge: 600,
    credentials: false,
  }
  const isPreflight = (request: FastifyRequest) =>
    request.method === 'OPTIONS' &&
    request.headers.origin !== undefined &&
    request.headers['access-control-request-method'] !== undefined
  await app.register(cors, {
    delegator: (request, callback) => {
      const applies = isPlantsPath(request.url) && (request.method !== 'OPTIONS' || isPreflight(request))
      callback(null, applies ? enabled : { origin: false })
    },
  })
}

export default fp(
  (app: FastifyInstance, { origins }: { origins: readonly string[] }) => registerCors(app, origins),
  { name: 'cors' },
)
