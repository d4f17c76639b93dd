import { randomBytes } from 'node:crypto'
import os from 'node:os'
import type { FastifyBaseLogger } from 'fastify'
import type { Config } from '../config.js'
import type { Background } from '../server.js'
import { type LeasedDelivery, type Storage, StoreUnavailableError } from '../storage/storage.js'
import { type BackoffPolicy, nextRetryAt } from './backoff.js'
import { countWebhookAttempt } from '../observability/metrics.js'
import type { Tracing } from '../observability/tracing.js'
import { sendWebhook } from './send-webhook.js'
import { mostWebhookSends, WEBHOOK_MAX_IN_FLIGHT, WEBHOOK_PER_SUBSCRIPTION } from './concurrency.js'

/** The pino methods the worker uses; Fastify's `app.log` fits. */
export type WorkerLogger = Pick<FastifyBaseLogger, 'debug' | 'info' | 'warn' | 'error'> & {
  child?: FastifyBaseLogger['child']
}

export type WorkerConfig = Pick<
  Config,
  | 'webhookTimeoutMs'
  | 'webhookMaxAttempts'
  | 'webhookBackoffBaseMs'
  | 'webhookBackoffMaxMs'
  | 'webhookPollMs'
  | 'webhookLeaseMs'
  | 'webhookAllowPrivate'
>

export interface DeliveryWorkerOptions {
  storage: Storage
  config: WorkerConfig
  logger: WorkerLogger
  /**
   * Sends in flight in this process across the subscribers that are below `perSubscription`; those
   * at it (slow ones) hold at most that many each on top.
   */
  maxInFlight?: number
  /** Sends in flight to one subscriber; a slow one is skipped by claims once it has this many. */
  perSubscription?: number
  /** How long stop() lets sends in flight finish before aborting them (their leases then expire). */
  stopGraceMs?: number
  /** Lease owner name; unique per process by default. */
  owner?: string
  /** A span per attempt and per send, when tracing is on. */
  tracing?: Tracing
}

interface InFlight {
  delivery: LeasedDelivery
  controller: AbortController
  done: Promise<void>
}

/** A unique lease owner: two processes (or two workers in one) never share one. */
export function workerOwnerId(): string {
  return `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`
}

/**
 * A store that is unavailable (a database outage, documented, answered 503 and recovered from by
 * itself) is a warning, as it is in the request log; anything else is an error.
 */
const levelFor = (error: unknown) => (error instanceof StoreUnavailableError ? 'warn' : 'error')

/**
 * Delivers the webhook outbox in the background. Every `webhookPollMs` (or sooner when nudged, or
 * when a send finishes) it leases due deliveries from the store and POSTs each one, concurrently:
 * the poll loop never waits for a send, so slow subscribers never hold up the others. At most
 * `perSubscription` sends per subscriber are in flight (a claim may add up to that many again while
 * some are still running, so the hard bound is below twice that), and `maxInFlight` across the
 * subscribers below that limit: however many subscribers hang, the healthy ones keep their share.
 * In all, never more than twice `maxInFlight` (mostWebhookSends), which the descriptor budget reserves.
 *
 * Guarantees come from the store: a delivery is leased to this worker until `now + webhookLeaseMs`
 * and recordAttempt is ignored once the lease went to another owner. A crash simply lets the lease
 * expire, and the delivery is sent again: delivery is at least once, deduplicated by `webhook-id`.
 */
export class DeliveryWorker implements Background {
  readonly owner: string
  private readonly storage: Storage
  private readonly config: WorkerConfig
  private readonly log: WorkerLogger
  private readonly policy: BackoffPolicy
  private readonly maxInFlight: number
  private readonly maxSends: number
  private readonly perSubscription: number
  private readonly stopGraceMs: number
  private readonly tracing: Tracing | undefined
  private readonly inFlight = new Map<string, InFlight>()
  private readonly perSubscriber = new Map<string, number>()
  private timer: NodeJS.Timeout | undefined
  private ticking: Promise<void> | undefined
  private again = false
  private started = false
  private stopped = false
  private stopping: Promise<void> | undefined
  private claimFailing = false

  constructor(options: DeliveryWorkerOptions) {
    this.storage = options.storage
    this.config = options.config
    const logger = options.logger
    this.log = logger.child ? logger.child({ component: 'webhooks' }) : logger
    this.policy = {
      baseMs: options.config.webhookBackoffBaseMs,
      maxMs: options.config.webhookBackoffMaxMs,
      maxAttempts: options.config.webhookMaxAttempts,
    }
    this.maxInFlight = options.maxInFlight ?? WEBHOOK_MAX_IN_FLIGHT
    this.maxSends = mostWebhookSends(this.maxInFlight)
    this.perSubscription = options.perSubscription ?? WEBHOOK_PER_SUBSCRIPTION
    this.stopGraceMs = options.stopGraceMs ?? 5_000
    this.owner = options.owner ?? workerOwnerId()
    this.tracing = options.tracing
  }

  /** Begins polling at once; pending deliveries left by an earlier process are picked up when due. */
  start(): void {
    if (this.started || this.stopped) return
    this.started = true
    if (this.config.webhookLeaseMs <= this.config.webhookTimeoutMs) {
      this.log.warn(
        { leaseMs: this.config.webhookLeaseMs, timeoutMs: this.config.webhookTimeoutMs },
        'WEBHOOK_LEASE_MS should exceed WEBHOOK_TIMEOUT_MS, or a slow send may be repeated by another worker',
      )
    }
    this.log.info({ owner: this.owner }, 'webhook delivery worker started')
    this.nudge()
  }

  /** Looks for due deliveries now instead of at the next poll (coalesced with a run in progress). */
  nudge(): void {
    if (!this.started || this.stopped) return
    if (this.ticking) {
      this.again = true
      return
    }
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    this.ticking = this.tick().finally(() => {
      this.ticking = undefined
      if (this.stopped) return
      if (this.again) {
        this.again = false
        this.nudge()
      } else this.schedule()
    })
  }

  /** Number of sends in flight (for tests and diagnostics). */
  get activeSends(): number {
    return this.inFlight.size
  }

  private schedule(): void {
    if (this.stopped || this.timer) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.nudge()
    }, this.config.webhookPollMs)
    // The HTTP server keeps the process alive; the worker alone must not.
    this.timer.unref()
  }

  /** One claim round; never throws. */
  private async tick(): Promise<void> {
    const saturated = [...this.perSubscriber].filter(([, n]) => n >= this.perSubscription).map(([id]) => id)
    // Sends held by subscribers at their own limit (the slow ones) do not count against the shared
    // limit: otherwise sixteen hanging subscribers would fill it and hold up every healthy one.
    const heldBySaturated = saturated.reduce((sum, id) => sum + (this.perSubscriber.get(id) ?? 0), 0)
    // However many subscribers hang, the sends (a socket each) stay within the descriptor budget.
    const free = Math.min(
      this.maxInFlight - (this.inFlight.size - heldBySaturated),
      this.maxSends - this.inFlight.size,
    )
    if (free <= 0) return
    const now = new Date()
    let claimed: LeasedDelivery[]
    try {
      claimed = await this.storage.claimDeliveries({
        owner: this.owner,
        now,
        leaseUntil: new Date(now.getTime() + this.config.webhookLeaseMs),
        limit: free,
        perSubscription: this.perSubscription,
        excludeSubscriptions: saturated,
      })
      if (this.claimFailing) this.log.info('webhook outbox reachable again')
      this.claimFailing = false
    } catch (error) {
      // The store may be down for a while: say so once, then quietly keep polling.
      if (this.claimFailing) this.log.debug({ err: error }, 'claiming webhook deliveries failed again')
      else this.log[levelFor(error)]({ err: error }, 'claiming webhook deliveries failed; will keep retrying')
      this.claimFailing = true
      return
    }
    // Claimed while stop() began: leave them leased; the lease expires and they are sent after restart.
    if (this.stopped) return
    for (const delivery of claimed) this.launch(delivery)
    // A full claim means more may be due right away.
    if (claimed.length >= free && claimed.length > 0) this.again = true
  }

  private launch(delivery: LeasedDelivery): void {
    const controller = new AbortController()
    this.perSubscriber.set(
      delivery.subscriptionId,
      (this.perSubscriber.get(delivery.subscriptionId) ?? 0) + 1,
    )
    const entry: InFlight = {
      delivery,
      controller,
      done: this.deliver(delivery, controller)
        .catch((error) => this.log.error({ err: error, deliveryId: delivery.id }, 'webhook send crashed'))
        .finally(() => {
          this.inFlight.delete(delivery.id)
          const left = (this.perSubscriber.get(delivery.subscriptionId) ?? 1) - 1
          if (left > 0) this.perSubscriber.set(delivery.subscriptionId, left)
          else this.perSubscriber.delete(delivery.subscriptionId)
          // A slot is free: more of this subscriber's backlog may be waiting.
          this.nudge()
        }),
    }
    this.inFlight.set(delivery.id, entry)
  }

  /** One attempt, in a trace of its own when tracing is on. */
  private deliver(delivery: LeasedDelivery, controller: AbortController): Promise<void> {
    const attempt = () => this.attempt(delivery, controller)
    return this.tracing ? this.tracing.webhookDelivery(delivery, attempt) : attempt()
  }

  /** One attempt: send (`send-webhook.ts`), then log and record what became of it. */
  private async attempt(delivery: LeasedDelivery, controller: AbortController): Promise<void> {
    const { webhookTimeoutMs: timeoutMs, webhookAllowPrivate: allowPrivate } = this.config
    const send = () => sendWebhook(delivery, { timeoutMs, allowPrivate }, controller)
    const sent = await (this.tracing ? this.tracing.webhookSend(delivery, send) : send())
    const { status, interrupted } = sent
    // Cut short by stop(): recorded, so the operator sees it, and due again at once rather than when
    // the lease runs out, for this process after a restart or for another instance now. The
    // subscriber may have received it: it is sent again with the same webhook-id, as after a crash.
    const error = interrupted ? 'interrupted: the worker stopped before the subscriber answered' : sent.error
    const ok = error === null
    const at = new Date()
    const attempts = delivery.attempts + 1
    const backoff = ok ? null : nextRetryAt(this.policy, attempts, at)
    // An interrupted send is due again at once, not after a backoff, and even when it was the last
    // attempt allowed: it never got an answer, and a stop must not fail a delivery for good.
    const retryAt = interrupted ? at : backoff
    const fields = { deliveryId: delivery.id, subscriptionId: delivery.subscriptionId, attempts, status }
    countWebhookAttempt(ok ? 'delivered' : retryAt ? 'retry' : 'failed')
    if (ok) this.log.debug(fields, 'webhook delivered')
    else if (retryAt) this.log.info({ ...fields, error, retryAt }, 'webhook attempt failed; will retry')
    else this.log.warn({ ...fields, error }, 'webhook delivery failed: no attempts left')
    try {
      await this.storage.recordAttempt({
        deliveryId: delivery.id,
        leaseOwner: this.owner,
        ok,
        status,
        error,
        at,
        retryAt,
      })
    } catch (caught) {
      // Not recorded: the lease expires and the delivery is sent again (receivers dedupe on webhook-id).
      this.log[levelFor(caught)](
        { err: caught, deliveryId: delivery.id },
        'recording a webhook attempt failed',
      )
    }
  }

  /**
   * Stops polling, lets sends in flight finish for up to `stopGraceMs`, then aborts the rest and
   * records each as an interrupted attempt that is due again at once (by this process after a
   * restart, or by another instance). Never throws.
   */
  stop(): Promise<void> {
    this.stopping ??= this.shutdown().catch((error) => {
      this.log.error({ err: error }, 'stopping the webhook worker failed')
    })
    return this.stopping
  }

  private async shutdown(): Promise<void> {
    this.stopped = true
    if (this.timer) clearTimeout(this.timer)
    this.timer = undefined
    // A claim in progress should settle before the store closes (bounded: the store may hang).
    if (this.ticking) await within(this.ticking, this.stopGraceMs)
    const pending = () => Promise.all([...this.inFlight.values()].map((entry) => entry.done))
    if (this.inFlight.size > 0) {
      this.log.info({ inFlight: this.inFlight.size }, 'waiting for webhook sends in flight')
      const finished = await within(pending(), this.stopGraceMs)
      if (!finished) {
        this.log.warn(
          { inFlight: this.inFlight.size },
          'aborting webhook sends still in flight; they will be retried at once',
        )
        for (const entry of this.inFlight.values()) entry.controller.abort(new Error('worker stopping'))
        // Aborted sends settle at once; a record stuck on the store must not hold shutdown forever.
        await within(pending(), 2_000)
      }
    }
    this.log.info('webhook delivery worker stopped')
  }
}

/** True when `promise` settled within `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms)
  })
  try {
    return await Promise.race([promise.then(() => true as const), timeout])
  } finally {
    clearTimeout(timer)
  }
}
