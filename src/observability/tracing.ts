import type { FastifyRequest } from 'fastify'
import type { LeasedDelivery, Storage } from '../storage/storage.js'

/** What a span needs of one webhook send's outcome (webhooks/send-webhook.ts's SendOutcome). */
export interface SentWebhook {
  status: number | null
  error: string | null
}

/** A request's span, opaque to everything but the module that made it. */
export interface RequestSpan {
  readonly kind: 'request span'
}

/**
 * What the OpenTelemetry module (otel.ts) gives the app and the webhook worker once loaded
 * (start-tracing.ts). This file imports nothing of OpenTelemetry.
 */
export interface Tracing {
  /** A server span, parented by the request's `traceparent` when a TRUST_PROXY peer sent it. */
  startRequest(request: FastifyRequest): RequestSpan
  /** Runs `next` (the rest of the request's hooks, or its handler) within the span. */
  within(span: RequestSpan, next: () => void): void
  /** Ends the span; `status` undefined: the client went away before its answer. */
  endRequest(span: RequestSpan, method: string, route: string | undefined, status: number | undefined): void
  /** The store with a child span for every call made within a span. */
  traceStorage(storage: Storage): Storage
  /** A span for one delivery attempt, the parent of its send and of the store calls recording it. */
  webhookDelivery(delivery: LeasedDelivery, attempt: () => Promise<void>): Promise<void>
  webhookSend<T extends SentWebhook>(delivery: LeasedDelivery, send: () => Promise<T>): Promise<T>
  /** Exports the spans still buffered; a Background of the server. */
  stop(): Promise<void>
}
