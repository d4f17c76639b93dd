/**
 * OpenTelemetry tracing, imported only by start-tracing.ts. The SDK packages are
 * imported dynamically here too (and kept out of the bundle, scripts/bundle.mjs), so that the
 * bundle never loads them unless tracing is on. The exporter, sampler and batching read the
 * standard OTEL_* variables themselves (docs/observability.md).
 */
import type { Context, Span } from '@opentelemetry/api'
import type { FastifyRequest } from 'fastify'
import type { Storage } from '../storage/storage.js'
import { loggedUrl } from './request-line.js'
import type { RequestSpan, Tracing } from './tracing.js'

interface Traced extends RequestSpan {
  span: Span
  context: Context
}

/**
 * `believed` says whether a peer is one TRUST_PROXY names, whose `traceparent` is believed: a
 * client's own would choose its trace id, and with its sampled flag off (`-00`) hide its request.
 */
export async function createTracing(believedPeer: (peer: string) => boolean): Promise<Tracing> {
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
  const believed = (request: FastifyRequest) => {
    const peer = request.socket.remoteAddress
    return peer !== undefined && believedPeer(peer)
  }

  const failed = (span: Span, error: unknown) => {
    span.recordException(error as Error)
    span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message })
  }

  return {
    startRequest(request) {
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
      const traced: Traced = { kind: 'request span', span, context: trace.setSpan(parent, span) }
      return traced
    },

    within(traced, next) {
      context.with((traced as Traced).context, next)
    },

    endRequest(traced, method, route, status) {
      const { span } = traced as Traced
      if (route) span.setAttribute('http.route', route)
      span.updateName(route ? `${method} ${route}` : method)
      if (status === undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: 'client went away' })
      else {
        span.setAttribute('http.response.status_code', status)
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
      }
      span.end()
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
