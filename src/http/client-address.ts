import type { IncomingMessage } from 'node:http'
import proxyAddr from '@fastify/proxy-addr'
import { normalizeIP } from '@fastify/rate-limit'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The client's address for a request no Fastify route saw (CONNECT, a refused Expect). */
    clientAddressOf(req: IncomingMessage): string | undefined
  }
}

/**
 * Gives answers written outside Fastify's routes the client address `request.ip` gives the others:
 * the peer, or with TRUST_PROXY the last X-Forwarded-For hop before the first untrusted one.
 */
/** Whether TRUST_PROXY names `address` (a peer's), as proxy-addr's trust functions answer. */
export const proxyTrust = (trustProxy: Config['trustProxy']): ((address: string, hop: number) => boolean) =>
  trustProxy === true ? () => true : trustProxy === false ? () => false : proxyAddr.compile(trustProxy)

export function installClientAddress(app: FastifyInstance, trustProxy: Config['trustProxy']): void {
  const trust = proxyTrust(trustProxy)
  app.decorate('clientAddressOf', (req: IncomingMessage) => {
    if (!req.socket) return undefined
    return proxyAddr.all(req, trust).at(-1)
  })
}

/**
 * The key a client is counted under by the per-address limits (failed authentications, open
 * connections): an IPv6 address by its /64, which one customer usually gets whole; an
 * IPv4-mapped IPv6 address as the IPv4 address.
 */
export function addressKey(address: string): string {
  return normalizeIP(address, 64)
}
