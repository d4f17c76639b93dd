/**
 * OpenTelemetry tracing, imported only by trace-hooks.ts's startTracing. The SDK packages are
 * imported dynamically here too (and kept out of the bundle, scripts/bundle.mjs), so that the
 * bundle never loads them unless tracing is on. The exporter, sampler and batching read the
 * standard OTEL_* variables themselves (docs/observability.md).
 */
import type { Context, Span } from '@opentelemetry/api'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Config } from '../config.js'
import { proxyTrust } from '../http/client-address.js'
import { loggedUrl } from '../http/request-logging.js'
import type { Storage } from '../storage/storage.js'
import type { Tracing } from './trace-hooks.js'

const requestSpan = Symbol('request span')
type Traced = FastifyRequest & { [requestSpan]?: { span: Span; context: Context } }

/**
 * `trustProxy` (TRUST_PROXY) names the peers whose `traceparent` is believed: a client's own would
 * choose its trace id, and with its sampled flag off (`-00`) hide its request from the traces.
 */
export async function createTracing(trustProxy: Config['trustProxy']): Promise<Tracing> {
  const api = await import('@opentelemetry/api')
  const { NodeTracerProvider, BatchSpanProcessor } = await import('@opentelemetry/sdk-trace-node')
  const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http')
  const resources = await import('@opentelemetry/resources')
  const { SpanKind, SpanStatusCode, trace, context, propagation, ROOT_CONTEXT } = api

  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the defaults.
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ 'service.name': 'plant-store' }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }))
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  })
  // The AsyncLocalStorage context manager and the W3C traceparent propagator.
  provider.register()
  const tracer = trace.getTracer('plant-store')
  const trusted = proxyTrust(trustProxy)
  const believed = (request: FastifyRequest) => {
    const peer = request.socket.remoteAddress
    return peer !== undefined && trusted(peer, 0)
  }

  const failed = (span: Span, error: unknown) => {
    span.recordException(error as Error)
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message })
  }

  return {
    instrument(app: FastifyInstance) {
      app.addHook('onRequest', (request: Traced, _reply, done) => {
        // Otherwise a root span, which the default sampler (parentbased_always_on) always keeps.
        const parent = believed(request) ? propagation.extract(ROOT_CONTEXT, request.headers) : ROOT_CONTEXT
        const span = tracer.startSpan(
          request.method,
          {
            kind: SpanKind.SERVER,
            attributes: {
              'http.request.method': request.method,
              'url.path': loggedUrl(request.url.split('?')[0]),
              'plant_store.request_id': request.id,
            },
          },
          parent,
        )
        const active = trace.setSpan(parent, span)
        request[requestSpan] = { span, context: active }
        context.with(active, done)
      })
      // The handler runs from the body parser's callbacks, outside the context onRequest entered.
      app.addHook('preHandler', (request: Traced, _reply, done) => {
        const traced = request[requestSpan]
        if (traced) context.with(traced.context, done)
        else done()
      })
      const end = (request: Traced, status: number | undefined) => {
        const traced = request[requestSpan]
        if (!traced) return
        request[requestSpan] = undefined
        const route = request.routeOptions.url
        if (route) traced.span.setAttribute('http.route', route)
        traced.span.updateName(route ? `${request.method} ${route}` : request.method)
        if (status === undefined)
          traced.span.setStatus({ code: SpanStatusCode.ERROR, message: 'client went away' })
        else {
          traced.span.setAttribute('http.response.status_code', status)
          if (status >= 500) traced.span.setStatus({ code: SpanStatusCode.ERROR })
        }
        traced.span.end()
      }
      app.addHook('onResponse', (request, reply, done) => {
        end(request, reply.statusCode)
        done()
      })
      app.addHook('onRequestAbort', (request, done) => {
        end(request, undefined)
        done()
      })
    },

    traceStorage(storage: Storage): Storage {
      const wrapped = new Map<PropertyKey, unknown>()
      return new Proxy(storage, {
        get(target, name) {
          const value: unknown = Reflect.get(target, name, target)
          if (typeof value !== 'function') return value
          if (!wrapped.has(name)) {
            const method = value as (...args: unknown[]) => unknown
            wrapped.set(name, (...args: unknown[]) => {
              // Only within a request or a send: the worker's polls would each start a trace.
              if (!trace.getSpan(context.active())) return method.apply(target, args)
              const span = tracer.startSpan(`store ${String(name)}`, {
                kind: SpanKind.CLIENT,
                attributes: { 'db.system.name': target.kind === 'postgres' ? 'postgresql' : 'sqlite' },
              })
              const result = context.with(trace.setSpan(context.active(), span), () =>
                method.apply(target, args),
              )
              if (!(result instanceof Promise)) {
                span.end()
                return result
              }
              return result.then(
                (value) => {
                  span.end()
                  return value
                },
                (error: unknown) => {
                  failed(span, error)
                  span.end()
                  throw error
                },
              )
            })
          }
          return wrapped.get(name)
        },
      })
    },

    webhookDelivery(delivery, attempt) {
      const attributes = {
        'plant_store.webhook_id': delivery.id,
        'plant_store.subscription_id': delivery.subscriptionId,
        'plant_store.attempt': delivery.attempts + 1,
      }
      return tracer.startActiveSpan('webhook delivery', { attributes }, async (span) => {
        try {
          await attempt()
        } catch (error) {
          failed(span, error)
          throw error
        } finally {
          span.end()
        }
      })
    },

    webhookSend(delivery, send) {
      // The URL without its query, which may carry a subscriber's own secret.
      const url = new URL(delivery.url)
      return tracer.startActiveSpan(
        'webhook send',
        {
          kind: SpanKind.CLIENT,
          attributes: { 'http.request.method': 'POST', 'url.full': `${url.origin}${url.pathname}` },
        },
        async (span) => {
          try {
            const outcome = await send()
            if (outcome.status !== null) span.setAttribute('http.response.status_code', outcome.status)
            if (outcome.error) span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error })
            return outcome
          } catch (error) {
            failed(span, error)
            throw error
          } finally {
            span.end()
          }
        },
      )
    },

    async stop() {
      await provider.shutdown()
    },
  }
}
