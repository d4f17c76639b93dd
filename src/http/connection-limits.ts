import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import proxyAddr from '@fastify/proxy-addr'
import { openFileLimit, refusalReserve } from '../descriptor-budget.js'
import { ApiError } from '../errors.js'
import { addressKey } from './client-address.js'
import { noteRefusal, type RefusalKind } from './refusals.js'

export interface ConnectionLimits {
  max: number
  /** 0 for no cap per address. */
  perAddress: number
  /** TRUST_PROXY: a trusted proxy's connections carry many clients and are not capped per address. */
  trustProxy: boolean | string[]
}

/** Seconds a refused client is asked to wait: a connection's place frees as soon as one closes. */
const RETRY_AFTER_S = 1

/** How long a refused connection has to send its request head before it is closed unanswered. */
export const REFUSED_HEAD_MS = 2_000

const refused = Symbol('refusedConnection')
type CappedSocket = Socket & { [refused]?: RefusalKind }

/**
 * Caps open connections in all and per client address (IPv6 by /64, as the failed-auth limit
 * counts). A connection over a cap is not closed unread: Node's parser reads its request head, the
 * request checks (http/request-checks.ts) answer it 503 in the Error shape with Retry-After and
 * Connection: close, as nginx's limit_conn does, and it closes; one that sends no head within
 * REFUSED_HEAD_MS is closed. Only past the cap and a reserve of descriptors for those answers does
 * Node close connections before reading them. Returns the refusal of a request on such a
 * connection: one symbol read per request.
 */
export function limitConnections(
  app: FastifyInstance,
  limits: ConnectionLimits,
): (request: FastifyRequest) => ApiError | undefined {
  const server = app.server
  server.maxConnections = limits.max + refusalReserve(openFileLimit())
  server.on('drop', () => noteRefusal('connections'))
  // accept() failing with no descriptor left is an 'error' on the server: without a listener, a crash.
  server.on('error', (error: NodeJS.ErrnoException) => {
    if (error.syscall !== 'accept') return
    noteRefusal('connections')
    app.log.warn({ err: error }, 'could not accept a connection')
  })
  const perAddress = limits.perAddress === 0 || limits.trustProxy === true ? 0 : limits.perAddress
  const trusted = proxyAddr.compile(limits.trustProxy === true ? [] : limits.trustProxy || [])
  const perKey = new Map<string, number>()
  let served = 0
  // Before Node's own listener, so that the mark is there before its parser reads.
  server.prependListener('connection', (socket: CappedSocket) => {
    const address = socket.remoteAddress
    const key =
      perAddress > 0 && address !== undefined && !trusted(address, 0) ? addressKey(address) : undefined
    const count = key === undefined ? 0 : (perKey.get(key) ?? 0)
    const over: RefusalKind | undefined =
      served >= limits.max
        ? 'connections'
        : key !== undefined && count >= perAddress
          ? 'connections-per-address'
          : undefined
    if (over) return refuse(socket, over)
    served++
    if (key !== undefined) perKey.set(key, count + 1)
    socket.once('close', () => {
      served--
      if (key === undefined) return
      const left = (perKey.get(key) ?? 1) - 1
      if (left === 0) perKey.delete(key)
      else perKey.set(key, left)
    })
  })
  return (request) => {
    const kind = (request.raw.socket as CappedSocket | null)?.[refused]
    if (kind === undefined) return undefined
    const message =
      kind === 'connections'
        ? `the service holds as many connections as it may (${limits.max}); this one is closed; retry after ${RETRY_AFTER_S} s`
        : `this client address holds as many connections as it may (${perAddress}); this one is closed; retry after ${RETRY_AFTER_S} s`
    const headers = { 'retry-after': String(RETRY_AFTER_S), connection: 'close' }
    return new ApiError('TOO_MANY_CONNECTIONS', message, { headers })
  }
}

function refuse(socket: CappedSocket, kind: RefusalKind): void {
  noteRefusal(kind)
  socket[refused] = kind
  // Refused connections must not hold descriptors for long: one that stays silent is closed.
  socket.setTimeout(REFUSED_HEAD_MS, () => socket.destroy())
}
