import type { FastifyInstance, onRequestHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'
import { named } from '../hook-order.js'
import { registerRateLimits } from '../http/rate-limits.js'
import type { Storage } from '../storage/storage.js'
import { requireScope } from './bearer-auth.js'
import type { Scope } from './token-format.js'
import { TokenVerifier } from './token-verifier.js'

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * The onRequest hook a route of `scope` runs (auth/bearer-auth.ts); `scrape` counts the
     * request against the token's scrape limit instead of its request limit.
     */
    bearerAuth(scope: Scope, counted?: 'request' | 'scrape'): onRequestHookHandler
  }
}

export interface AuthOptions {
  config: Config
  storage: Storage
}

/**
 * Bearer authentication for the routes: the token verifier with its cache (TOKEN_CACHE_MS), the
 * limits on failed authentications, requests and scrapes per token, and the hook a route runs.
 */
async function auth(app: FastifyInstance, { config, storage }: AuthOptions): Promise<void> {
  const verifier = new TokenVerifier(storage, config.tokenCacheMs)
  const limits = await registerRateLimits(app, config)
  app.decorate('bearerAuth', (scope: Scope, counted: 'request' | 'scrape' = 'request') => {
    const used = counted === 'scrape' ? limits.scrapes : limits.used
    return named(app, `auth: ${scope}`, requireScope(verifier, scope, { failed: limits.failed, used }))
  })
}

export default fp(auth, { name: 'auth', dependencies: ['contract'] })
