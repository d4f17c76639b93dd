import type { FastifyInstance } from 'fastify'
import { type ErrorCode, errorCatalog } from '../errors.js'
import { answerOnSocket } from '../http/client-errors.js'
import { securityHeaders } from '../http/security-headers.js'
import { logRequestLine, requestIdFrom } from '../observability/request-line.js'
import { type KnownPath, shownPath } from './method-not-allowed.js'

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment)
  } catch {
    return undefined
  }
}

/**
 * The known path a CONNECT's request-target names, matched as the router would: query and
 * fragment ignored, segments percent-decoded, a `:param` segment matching anything but nothing
 * (`/plants/` is no path of the API, app.ts). Authority-form (`host:port`) and `*` name no path.
 */
function knownPathOf(known: readonly KnownPath[], target: string): KnownPath | undefined {
  if (!target.startsWith('/')) return undefined
  const segments = (target.split(/[?#]/, 1)[0] ?? '').split('/').map(decodeSegment)
  return known.find((path) => {
    const pattern = path.url.split('/')
    return (
      pattern.length === segments.length &&
      pattern.every((part, i) => (part.startsWith(':') ? segments[i] !== '' : part === segments[i]))
    )
  })
}

/**
 * Node hands CONNECT to the server's 'connect' event, never to Fastify; with no listener it closes
 * the socket without a byte. The answer is given on the socket as a route would have: 405 with
 * Allow on a known path, like every other method there, and otherwise 501, since no resource
 * here takes CONNECT (RFC 9110 15.6.2). The service is no proxy: the connection is then closed.
 */
export function answerConnect(app: FastifyInstance, known: readonly KnownPath[]): void {
  app.server.on('connect', (req, socket) => {
    // Node took its own listeners off the socket; a reset with none would crash the process.
    socket.on('error', () => {})
    const reqId = requestIdFrom(req.headers['x-request-id'])
    const url = req.url ?? ''
    const path = knownPathOf(known, url)
    const headers: Record<string, string> = { 'X-Request-Id': reqId, ...securityHeaders(url) }
    let code: ErrorCode
    let message: string
    if (path) {
      code = 'METHOD_NOT_ALLOWED'
      message = `CONNECT is not allowed on ${shownPath(path.url)}; use ${path.allow.join(', ')}`
      headers.Allow = path.allow.join(', ')
    } else {
      code = 'METHOD_NOT_IMPLEMENTED'
      message = `CONNECT is not implemented for ${url}: this service is not a proxy; the connection is closed`
    }
    logRequestLine(app, {
      reqId,
      client: app.clientAddressOf(req),
      method: 'CONNECT',
      route: path?.url ?? null,
      url,
      status: errorCatalog[code].status,
    })
    answerOnSocket(socket, code, message, headers)
  })
}
