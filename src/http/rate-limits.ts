import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Config } from '../config.js'
import { ApiError } from '../errors.js'
import { addressKey } from './client-address.js'
import { FailureCounter } from './failure-counter.js'
import { noteRefusal, type RefusalKind } from './refusals.js'

const rateLimitHeaders = (max: number, seconds: string) => ({
  'retry-after': seconds,
  'ratelimit-limit': String(max),
  'ratelimit-remaining': '0',
  'ratelimit-reset': seconds,
})

/**
 * What authentication asks of the rate limits (auth/bearer-auth.ts). Each resolves to the 429 to
 * send instead of the usual answer, or undefined.
 */
export interface AuthLimits {
  /** Counts a failed authentication against the client's address. */
  failed(request: FastifyRequest): Promise<ApiError | undefined>
  /** Counts a request against its token; undefined when requests per token are not limited. */
  used: ((request: FastifyRequest) => Promise<ApiError | undefined>) | undefined
  /** Counts a scrape of GET /metrics against its token; undefined when scrapes are not limited. */
  scrapes: ((request: FastifyRequest) => Promise<ApiError | undefined>) | undefined
}

/**
 * Registers @fastify/rate-limit with no limit of its own on any route, and builds the limits
 * authentication applies: failed authentications per client address (the address Fastify gives,
 * proxy-aware with TRUST_PROXY; IPv6 by /64), counted for up to AUTH_FAILURE_CLIENTS addresses by
 * a FailureCounter, which forgets none before its window ends; when configured, requests per
 * token; and scrapes of GET /metrics per token (a scrape collects every metric, so it costs more
 * than a read). Counters live in this process: with several instances each counts on its own.
 */
export async function registerRateLimits(app: FastifyInstance, config: Config): Promise<AuthLimits> {
  await app.register(rateLimit, { global: false })
  const limit = (
    kind: RefusalKind,
    max: number,
    timeWindow: number,
    keyGenerator: (request: FastifyRequest) => string,
    what: string,
  ) => {
    const check = app.createRateLimit({ max, timeWindow, keyGenerator })
    return async (request: FastifyRequest) => {
      const state = await check(request)
      if (state.isAllowed || !state.isExceeded) return undefined
      noteRefusal(kind)
      const seconds = String(Math.max(1, state.ttlInSeconds))
      return new ApiError('TOO_MANY_REQUESTS', `${what}; retry after ${seconds} s`, {
        headers: rateLimitHeaders(state.max, seconds),
      })
    }
  }
  const counter = new FailureCounter(config.authFailureClients, config.authFailureWindowMs)
  const failures = async (request: FastifyRequest) => {
    const hit = counter.hit(addressKey(request.ip))
    if (!('full' in hit) && hit.count <= config.authFailureLimit) return undefined
    noteRefusal('auth-failures')
    const seconds = String(Math.max(1, Math.ceil(hit.endsInMs / 1000)))
    const why =
      'full' in hit
        ? `more than ${config.authFailureClients} client addresses (AUTH_FAILURE_CLIENTS) failed authentication in ${config.authFailureWindowMs / 1000} s`
        : `more than ${config.authFailureLimit} failed authentications from this address in ${config.authFailureWindowMs / 1000} s`
    return new ApiError('TOO_MANY_REQUESTS', `${why}; retry after ${seconds} s`, {
      headers: rateLimitHeaders(config.authFailureLimit, seconds),
    })
  }
  const perToken = limit(
    'token-rate',
    config.tokenRateLimit,
    config.tokenRateWindowMs,
    (request) => `token ${request.tokenId}`,
    `more than ${config.tokenRateLimit} requests with this token in ${config.tokenRateWindowMs / 1000} s`,
  )
  const scrapes = limit(
    'scrapes',
    config.metricsRateLimit,
    config.metricsRateWindowMs,
    (request) => `scrapes ${request.tokenId}`,
    `more than ${config.metricsRateLimit} scrapes of /metrics with this token in ${config.metricsRateWindowMs / 1000} s`,
  )
  return {
    failed: async (request) => (config.authFailureLimit === 0 ? undefined : failures(request)),
    used: config.tokenRateLimit === 0 ? undefined : perToken,
    scrapes: config.metricsRateLimit === 0 ? undefined : scrapes,
  }
}
