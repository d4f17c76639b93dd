import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import type { LeasedDelivery, Storage } from '../storage/storage.js'
import type { SendOutcome } from '../webhooks/send-webhook.js'

/**
 * What the OpenTelemetry module (otel.ts) plugs in once loaded. This file imports nothing of
 * OpenTelemetry, so that a service without OTEL_EXPORTER_OTLP_ENDPOINT never loads the SDK.
 */
export interface Tracing {
  /** A span per request, parented by the request's `traceparent` when a TRUST_PROXY peer sent it. */
  instrument(app: FastifyInstance): void
  /** The store with a child span for every call made within a span. */
  traceStorage(storage: Storage): Storage
  /** A span for one delivery attempt, the parent of its send and of the store calls recording it. */
  webhookDelivery(delivery: LeasedDelivery, attempt: () => Promise<void>): Promise<void>
  webhookSend(delivery: LeasedDelivery, send: () => Promise<SendOutcome>): Promise<SendOutcome>
  /** Exports the spans still buffered; a Background of the server. */
  stop(): Promise<void>
}

let active: Tracing | undefined

export const activeTracing = (): Tracing | undefined => active

/** Loads and starts the SDK when the configuration asks for tracing; otherwise imports nothing. */
export async function startTracing(
  config: Pick<Config, 'tracing' | 'trustProxy'>,
): Promise<Tracing | undefined> {
  if (!config.tracing || active) return active
  const { createTracing } = await import('./otel.js')
  active = await createTracing(config.trustProxy)
  return active
}

export function tracedDelivery(delivery: LeasedDelivery, attempt: () => Promise<void>): Promise<void> {
  return active ? active.webhookDelivery(delivery, attempt) : attempt()
}

export function tracedWebhookSend(
  delivery: LeasedDelivery,
  send: () => Promise<SendOutcome>,
): Promise<SendOutcome> {
  return active ? active.webhookSend(delivery, send) : send()
}
