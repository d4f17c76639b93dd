import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'
import { named } from '../hook-order.js'
import { installClientAddress } from './client-address.js'
import { closeWhenLast, numberOnConnection } from './drain.js'
import { installExpectHandling } from './expect-header.js'
import { MAX_HEADER_LINES } from './header-block.js'
import { lingerIfBodyUnread } from './lingering-close.js'
import { inRequestOrder } from './pipelining.js'
import { setSecurityHeaders } from './security-headers.js'

export interface ProtocolOptions {
  config: Config
  /** True from the start of a graceful shutdown (server.ts); absent, nothing drains. */
  draining: (() => boolean) | undefined
}

/**
 * HTTP/1.1 as the connection sees it: half-open connections, the header line cap, the Expect
 * handling, the client address; the first onRequest hook of every request (its number on the
 * connection for the drain, the security headers, its turn among pipelined requests) and one
 * onSend hook (the drain's `Connection: close`, then the lingering close). Costs per request:
 * two small hooks.
 */
function protocol(app: FastifyInstance, { config, draining }: ProtocolOptions, next: () => void): void {
  // A client may send its request and then shut its side of the connection (`nc -N`, some HTTP/1.0
  // clients). By default Node then drops every request on it that is still being answered: a
  // create was stored, never answered and never logged. Half-open, what is in flight is answered,
  // and the connection closed after the last answer.
  ;(app.server as { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen = true
  // Unset, Node keeps only the first 1,000 or so header lines, not the 2,000 it documents;
  // http/header-block.ts refuses a request that reaches the cap, whose later lines it never sees.
  app.server.maxHeadersCount = MAX_HEADER_LINES
  installClientAddress(app, config.trustProxy)
  installExpectHandling(app)

  // The numbering comes first: a hook that failed before it would leave the request unnumbered.
  const admit = (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    if (draining) numberOnConnection(request)
    setSecurityHeaders(request, reply)
    inRequestOrder(request, reply, done)
  }
  const bounds = { ms: config.lingerMs, bytes: config.lingerBytes }
  const beforeSending = (
    request: FastifyRequest,
    reply: FastifyReply,
    payload: unknown,
    done: (error: null, payload: unknown) => void,
  ) => {
    if (draining?.()) closeWhenLast(request, reply)
    lingerIfBodyUnread(request, reply, payload, done, bounds)
  }
  app.addHook('onRequest', named(app, 'protocol: admit', admit))
  app.addHook('onSend', named(app, 'protocol: drain and lingering close', beforeSending))
  next()
}

export default fp(protocol, { name: 'protocol' })
