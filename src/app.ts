import Fastify, { type FastifyInstance, type FastifyRequest, LogController } from 'fastify'
import { TokenVerifier } from './auth/token-verifier.js'
import type { Config } from './config.js'
import { ApiError } from './errors.js'
import { clientErrorHandler } from './http/client-errors.js'
import { installClientAddress } from './http/client-address.js'
import { limitConnections } from './http/connection-limits.js'
import { answerConnect } from './http/connect.js'
import { registerCors } from './http/cors.js'
import { installErrorHandler, sendError } from './http/error-handler.js'
import { closeConnectionsWhileDraining } from './http/drain.js'
import { installExpectHandling } from './http/expect-header.js'
import { MAX_HEADER_LINES } from './http/header-block.js'
import { requireHost } from './http/host-header.js'
import { registerJsonBodyParser } from './http/json-body.js'
import { installRequestDeadline } from './http/request-deadline.js'
import { lazyRequestLogger } from './http/lazy-request-logger.js'
import { installLingeringClose } from './http/lingering-close.js'
import { registerLoadShedding } from './http/load-shedding.js'
import { refuseUnsupportedFraming } from './http/message-framing.js'
import { handlePipelinedRequestsInOrder } from './http/pipelining.js'
import { badPathEncoding, badQueryEncoding } from './http/query-encoding.js'
import { registerRateLimits } from './http/rate-limits.js'
import { installRequestLogging, logRequestLine, requestIdFrom } from './http/request-logging.js'
import { installSecurityHeaders, securityHeaders } from './http/security-headers.js'
import { dedupedSerializers } from './http/serializers.js'
import { refuseBeforeRouting } from './http/unrouted.js'
import { installValidators } from './http/validators.js'
import { loggerOptions } from './observability/log-options.js'
import { installHttpMetrics, metricsRoute } from './observability/http-metrics.js'
import { activeTracing } from './observability/trace-hooks.js'
import { registerOpenApi } from './openapi/document.js'
import { docsRoutes } from './routes/docs.js'
import { healthRoutes } from './routes/health.js'
import { methodNotAllowed, routeEveryHttpMethod } from './routes/method-not-allowed.js'
import { plantRoutes } from './routes/plants.js'
import { sharedSchemas } from './schemas/shared.js'
import type { Storage } from './storage/storage.js'

const routeNotFound = (request: FastifyRequest) =>
  refuseBeforeRouting(
    request,
    new ApiError('ROUTE_NOT_FOUND', `no route for ${request.method} ${request.url.split('?')[0]}`),
  )

/**
 * The longest path parameter the router takes (the only one is a plant id): an int64 has at most
 * 20 characters, and leading zeros (`/plants/007`) are allowed up to this.
 */
const MAX_ID_LENGTH = 100

/** How often Node looks for connections past their headers or request timeout. */
const CONNECTION_CHECK_MS = 500

/**
 * The only way the HTTP app is built: the server, the CLI and every test call this with a config
 * and a storage adapter. It does not listen; see server.ts.
 */
export async function buildApp(
  config: Config,
  storage: Storage,
  options: { draining?: () => boolean } = {},
): Promise<FastifyInstance> {
  const app = Fastify({
    logger: await loggerOptions(config),
    // One line per request, written by installRequestLogging, instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: config.bodyLimit,
    // Behind a load balancer, the client's scheme and host (for the list's Link URL) come from
    // X-Forwarded-Proto/-Host, believed only from the proxies TRUST_PROXY names.
    trustProxy: config.trustProxy,
    // A slow-loris client must not hold a socket: Node checks every CONNECTION_CHECK_MS for headers
    // older than headersTimeout, so with the defaults one is cut off 9 to 9.5 s after it began.
    // Node would answer an HTTP/1.1 request without Host itself, with an empty 400; requireHost
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
      const client = app.clientAddressOf(request.raw)
      logRequestLine(app, { reqId, client, method, route: null, url, status: refusal.status })
      sendError(reply, refusal)
    },
  })

  // A client may send its request and then shut its side of the connection (`nc -N`, some HTTP/1.0
  // clients). By default Node then drops every request on it that is still being answered: a
  // create was stored, never answered and never logged. Half-open, what is in flight is answered,
  // and the connection closed after the last answer.
  ;(app.server as { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen = true
  installClientAddress(app, config.trustProxy)
  installSecurityHeaders(app)
  // Unset, Node keeps only the first 1,000 or so header lines, not the 2,000 it documents;
  // http/header-block.ts refuses a request that reaches the cap, whose later lines it never sees.
  app.server.maxHeadersCount = MAX_HEADER_LINES
  if (options.draining) closeConnectionsWhileDraining(app, options.draining)
  handlePipelinedRequestsInOrder(app)
  routeEveryHttpMethod(app)
  for (const schema of sharedSchemas) app.addSchema(schema)
  installValidators(app, sharedSchemas)
  installErrorHandler(app, config.bodyLimit)
  installRequestLogging(app)
  if (storage.kind === 'postgres') installRequestDeadline(app)
  // Served here unless METRICS_PORT takes them elsewhere (observability/metrics-server.ts).
  const servesMetrics = config.metrics && config.metricsPort === undefined
  if (config.metrics) installHttpMetrics(app, storage)
  activeTracing()?.instrument(app)
  limitConnections(app, {
    max: config.maxConnections,
    perAddress: config.maxConnectionsPerAddress,
    trustProxy: config.trustProxy,
  })
  registerLoadShedding(app, config)
  installLingeringClose(app, { ms: config.lingerMs, bytes: config.lingerBytes })
  app.addHook('onRequest', refuseUnsupportedFraming)
  app.addHook('onRequest', requireHost)
  installExpectHandling(app)
  // The last checks before a body is read, after authentication, on every route. An unknown path
  // is answered here, its body unread: only POST /plants sends the 100 Continue a client may be
  // waiting for before it sends one.
  app.addHook('preParsing', (request, _reply, payload, done) => {
    if (request.is404) return done(routeNotFound(request))
    const badQuery = badQueryEncoding(request.url)
    if (badQuery) return done(badQuery)
    done(null, payload)
  })
  registerJsonBodyParser(app)
  app.setNotFoundHandler(async (request) => {
    throw routeNotFound(request)
  })

  await registerOpenApi(app)
  await docsRoutes(app)
  const verifier = new TokenVerifier(storage, config.tokenCacheMs)
  const limits = await registerRateLimits(app, config)
  plantRoutes(app, storage, verifier, limits)
  // `/plants/` would be `/plants/{id}` with an empty id: a POST to it was a 405 that sent the
  // client to GET and DELETE. Like `/plants/1/`, it is a path the API does not have.
  app.route({
    method: app.supportedMethods,
    url: '/plants/',
    schema: { hide: true },
    onRequest: (request, _reply, done) => done(routeNotFound(request)),
    handler: async () => {
      throw new Error('unreachable: the onRequest hook answers every request of this route')
    },
  })
  healthRoutes(app, storage)
  await registerCors(app, config.corsOrigins)
  if (servesMetrics) metricsRoute(app, verifier, limits)
  answerConnect(app, [
    methodNotAllowed(app, '/plants', ['GET', 'POST']),
    methodNotAllowed(app, '/plants/:id', ['GET', 'DELETE']),
    methodNotAllowed(app, '/openapi.json', ['GET']),
    methodNotAllowed(app, '/healthz', ['GET']),
    methodNotAllowed(app, '/readyz', ['GET']),
    ...(servesMetrics ? [methodNotAllowed(app, '/metrics', ['GET'])] : []),
  ])
  await app.ready()
  return app
}
