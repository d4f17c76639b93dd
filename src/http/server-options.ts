import type { Server } from 'node:http'
import { type FastifyHttpOptions, LogController } from 'fastify'
import type { Config } from '../config.js'
import { ApiError } from '../errors.js'
import { lazyRequestLogger } from '../observability/lazy-request-logger.js'
import { loggerOptions } from '../observability/log-options.js'
import { logRequestLine, requestIdFrom } from '../observability/request-line.js'
import { clientErrorHandler } from './client-errors.js'
import { sendError } from './error-handler.js'
import { badPathEncoding } from './query-encoding.js'
import { securityHeaders } from './security-headers.js'
import { dedupedSerializers } from './serializers.js'

/**
 * The longest path parameter the router takes (the only one is a plant id): an int64 has at most
 * 20 characters, and leading zeros (`/plants/007`) are allowed up to this.
 */
const MAX_ID_LENGTH = 100

/** How often Node looks for connections past their headers or request timeout. */
const CONNECTION_CHECK_MS = 500

/** The options the Fastify instance is created with (app.ts): the server, the router, the logger. */
export async function serverOptions(config: Config): Promise<FastifyHttpOptions<Server>> {
  return {
    logger: await loggerOptions(config),
    // One line per request, written by the observability plugin, instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: config.bodyLimit,
    // Behind a load balancer, the client's scheme and host (for the list's Link URL) come from
    // X-Forwarded-Proto/-Host, believed only from the proxies TRUST_PROXY names.
    trustProxy: config.trustProxy,
    // A slow-loris client must not hold a socket: Node checks every CONNECTION_CHECK_MS for headers
    // older than headersTimeout, so with the defaults one is cut off 9 to 9.5 s after it began.
    // Node would answer an HTTP/1.1 request without Host itself, with an empty 400; hostRefusal
    // (http/host-header.ts) answers it in the Error shape.
    http: {
      headersTimeout: config.headersTimeoutMs,
      connectionsCheckingInterval: CONNECTION_CHECK_MS,
      requireHostHeader: false,
    },
    requestTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    forceCloseConnections: 'idle',
    // During a drain, a request arriving on a connection that is still open is served as usual,
    // with Connection: close (the store stays open until the drain ends). Fastify's 503 for it
    // was in a shape of its own, and made a rolling restart fail requests a peer would have served.
    return503OnClosing: false,
    exposeHeadRoutes: true,
    routerOptions: { maxParamLength: MAX_ID_LENGTH },
    schemaController: { compilersFactory: { buildSerializer: dedupedSerializers() } },
    clientErrorHandler,
    // Malformed percent-encoding and over-long path parameters (the only one is a plant id) are
    // rejected by the router before any route runs; answer them in the Error shape too. No hook
    // runs for them either: the request id and the log line are given here.
    frameworkErrors: (error, request, reply) => {
      const refusal =
        error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? new ApiError(
              'VALIDATION_FAILED',
              `path parameter id is too long: it has at most ${MAX_ID_LENGTH} characters`,
              {
                details: [{ field: 'id', rule: `has at most ${MAX_ID_LENGTH} characters` }],
              },
            )
          : badPathEncoding(request.url)
      reply.header('x-request-id', request.id).headers(securityHeaders(request.url))
      const { method, url, id: reqId } = request
      const app = reply.server
      const client = app.clientAddressOf(request.raw)
      logRequestLine(app, { reqId, client, method, route: null, url, status: refusal.status })
      sendError(reply, refusal)
    },
  }
}
