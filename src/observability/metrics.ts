/**
 * The service's Prometheus metrics, in prom-client's global registry: one set per process, which
 * is also what prom-client's AggregatorRegistry collects from each worker of `serve --workers N`.
 * Every name is listed in docs/observability.md.
 */
import client from 'prom-client'
import type { CommitObserver, ReadObserver, ReadPlace } from '../storage/storage.js'

const PREFIX = 'plant_store_'

const seconds = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

type RequestLabel = 'route' | 'method' | 'status'

/** One per (route, method, status) seen: its answered requests and their durations. */
interface RequestTally {
  labels: Record<RequestLabel, string>
  answered: number
  /** How many of `answered` the counter has been given. */
  counted: number
  seconds: client.Histogram.Internal<RequestLabel>
}
const requestTallies: RequestTally[] = []

new client.Counter({
  name: `${PREFIX}http_requests_total`,
  help: 'HTTP requests answered, by route pattern, method and status',
  labelNames: ['route', 'method', 'status'] as const,
  collect() {
    for (const tally of requestTallies) {
      if (tally.answered === tally.counted) continue
      this.inc(tally.labels, tally.answered - tally.counted)
      tally.counted = tally.answered
    }
  },
})
const requestSeconds = new client.Histogram({
  name: `${PREFIX}http_request_duration_seconds`,
  help: 'Time from the request line to the end of the answer, by route pattern, method and status',
  labelNames: ['route', 'method', 'status'] as const,
  buckets: seconds,
})
let inFlight = 0
new client.Gauge({
  name: `${PREFIX}http_requests_in_flight`,
  help: 'HTTP requests received and not yet answered',
  collect() {
    this.set(inFlight)
  },
})

/** A request received (`+1`) or answered or abandoned (`-1`); read at each scrape, like the tallies. */
export const countInFlight = (change: 1 | -1): void => {
  inFlight += change
}

const batchSize = new client.Histogram({
  name: `${PREFIX}group_commit_batch_size`,
  help: "Creates (SQLite: writes, the webhook worker's polls included) that shared one commit",
  buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
})
const commitSeconds = new client.Histogram({
  name: `${PREFIX}group_commit_duration_seconds`,
  help: 'Time from the start of a group commit to its answers (SQLite: including the WAL sync)',
  buckets: seconds,
})

const storeErrors = new client.Counter({
  name: `${PREFIX}store_errors_total`,
  help: 'Requests answered 503 because of the store, by kind',
  labelNames: ['kind'] as const,
})
const authFailures = new client.Counter({
  name: `${PREFIX}auth_failures_total`,
  help: 'Requests refused by bearer authentication (401, 403, or a token in the query), by reason',
  labelNames: ['reason'] as const,
})
const webhookAttempts = new client.Counter({
  name: `${PREFIX}webhook_attempts_total`,
  help: 'Webhook send attempts, by outcome: delivered, retry (failed, will be retried), failed (for good)',
  labelNames: ['outcome'] as const,
})
const rateLimited = new client.Counter({
  name: `${PREFIX}rate_limited_total`,
  help: 'Requests refused with 429 by a rate limit, by limit',
  labelNames: ['limit'] as const,
})
const loadShed = new client.Counter({
  name: `${PREFIX}load_shed_total`,
  help: 'Requests refused with 503 because the process was overloaded',
})
const sampleFailures = new client.Counter({
  name: `${PREFIX}load_shed_sample_failures_total`,
  help: "Load shedding's once-a-second samples that failed (their previous values are kept)",
})

/** The numbers a store adapter gives the metrics at each scrape. */
export interface StoreGauges {
  /** Pending webhook deliveries and the creation time of the oldest. */
  webhookBacklog(): Promise<{ pending: number; oldestCreatedAt: Date | null }>
  /** Database connections in use and requests waiting for one; undefined when the driver has no pool. */
  poolStats?(): { inUse: number; waiting: number } | undefined
  /** SQLite: the WAL's size. */
  details?(): { walBytes?: number }
}

let store: StoreGauges | undefined

/**
 * How long one reading of the webhook backlog serves the scrapes that follow: a scrape storm
 * reads the store once per this window, whatever its rate (docs/observability.md).
 */
export const BACKLOG_CACHE_MS = 5_000

type Backlog = Awaited<ReturnType<StoreGauges['webhookBacklog']>> | undefined
let backlog: { at: number; reading: Promise<Backlog> } | undefined

/** The store the scrape-time gauges read; `undefined` stops reading it (it is closing). */
export function watchStore(next: StoreGauges | undefined): void {
  store = next
  backlog = undefined
}

// Both backlog gauges share one reading (one query), cached for BACKLOG_CACHE_MS; a failed one
// too, so that a store that is down is not asked again by every scrape.
const readBacklog = (): Promise<Backlog> => {
  const now = Date.now()
  if (!backlog || now - backlog.at >= BACKLOG_CACHE_MS) {
    backlog = {
      at: now,
      reading: store?.webhookBacklog().catch(() => undefined) ?? Promise.resolve(undefined),
    }
  }
  return backlog.reading
}

new client.Gauge({
  name: `${PREFIX}webhook_deliveries_pending`,
  help: 'Webhook deliveries not yet delivered nor failed for good',
  // Every worker of a cluster reads the same store: summed, the backlog would count N times.
  aggregator: 'max',
  async collect() {
    const reading = await readBacklog()
    if (reading) this.set(reading.pending)
  },
})
new client.Gauge({
  name: `${PREFIX}webhook_oldest_pending_age_seconds`,
  help: 'Age of the oldest pending webhook delivery (0 when none is pending)',
  aggregator: 'max',
  async collect() {
    const oldest = (await readBacklog())?.oldestCreatedAt
    if (oldest !== undefined) this.set(oldest ? Math.max(0, Date.now() - oldest.getTime()) / 1000 : 0)
  },
})
new client.Gauge({
  name: `${PREFIX}db_pool_connections_in_use`,
  help: 'PostgreSQL connections running a query (absent when the driver does not tell)',
  collect() {
    const stats = store?.poolStats?.()
    if (stats) this.set(stats.inUse)
  },
})
new client.Gauge({
  name: `${PREFIX}db_pool_waiting`,
  help: 'Queries waiting for a PostgreSQL connection (absent when the driver does not tell)',
  collect() {
    const stats = store?.poolStats?.()
    if (stats) this.set(stats.waiting)
  },
})

new client.Gauge({
  name: `${PREFIX}sqlite_wal_bytes`,
  help: "Bytes in SQLite's WAL file (absent on PostgreSQL): near 4 MiB under steady writes",
  // Every worker of a cluster sees the same file.
  aggregator: 'max',
  collect() {
    const bytes = store?.details?.().walBytes
    if (bytes !== undefined) this.set(bytes)
  },
})

let defaultMetrics = false

/** Node's process metrics (CPU, memory, event loop lag, GC), once per process, when metrics are on. */
export function collectProcessMetrics(): void {
  if (defaultMetrics) return
  defaultMetrics = true
  client.collectDefaultMetrics()
}

/**
 * The request series of one route pattern (never the raw URL), one per (method, status) label
 * pair, each bound to its histogram child the first time it is seen: a request costs an array
 * read, not a label lookup.
 */
export class RouteSeries {
  private readonly tallies: (RequestTally | undefined)[] = []

  constructor(
    private readonly route: string,
    private readonly methods: readonly string[],
    private readonly statuses: readonly (number | 'other')[],
  ) {}

  /** Counts one answered request; the indexes are into the method and status label lists. */
  observe(method: number, status: number, elapsedSeconds: number): void {
    const slot = method * this.statuses.length + status
    let tally = this.tallies[slot]
    if (!tally) {
      const labels = {
        route: this.route,
        method: this.methods[method] as string,
        status: String(this.statuses[status]),
      }
      tally = { labels, answered: 0, counted: 0, seconds: requestSeconds.labels(labels) }
      this.tallies[slot] = tally
      requestTallies.push(tally)
    }
    tally.answered++
    tally.seconds.observe(elapsedSeconds)
  }
}

/** For the store's group commit (a process has one store, so no label says which). */
export const commitObserver: CommitObserver = {
  batchCommitted(count, durationMs) {
    batchSize.observe(count)
    commitSeconds.observe(durationMs / 1000)
  },
}

const plantReads = new client.Counter({
  name: `${PREFIX}plant_reads_total`,
  help: 'Plant reads with DATABASE_READ_URL, by where they ran: the replica (caught_up), or the primary because the replica was lagging or unavailable',
  labelNames: ['ran', 'reason'] as const,
})
const readLabels: Record<ReadPlace, { ran: string; reason: string }> = {
  replica: { ran: 'replica', reason: 'caught_up' },
  lagging: { ran: 'primary', reason: 'lagging' },
  unavailable: { ran: 'primary', reason: 'unavailable' },
}
/** Each place's child, bound the first time it is counted: a batch then costs no label lookup. */
const readCounts: Partial<Record<ReadPlace, client.Counter.Internal>> = {}

/** For the read pool: where a batch of plant reads ran. */
export const readObserver: ReadObserver = {
  readsRan(place, count) {
    ;(readCounts[place] ??= plantReads.labels(readLabels[place])).inc(count)
  },
}

export type StoreErrorKind = 'unavailable' | 'read_only' | 'write_failed'
export const countStoreError = (kind: StoreErrorKind): void => storeErrors.inc({ kind })

export type AuthFailureReason =
  'missing' | 'malformed' | 'unknown' | 'revoked' | 'expired' | 'insufficient_scope' | 'token_in_query'
export const countAuthFailure = (reason: AuthFailureReason): void => authFailures.inc({ reason })

export type WebhookOutcome = 'delivered' | 'retry' | 'failed'
export const countWebhookAttempt = (outcome: WebhookOutcome): void => webhookAttempts.inc({ outcome })

/** For the rate limiter: one request refused with 429 by the limit named (e.g. `token`, `ip`). */
export const countRateLimited = (limit: string): void => rateLimited.inc({ limit })

/** For load shedding: one request refused because the process was overloaded. */
export const countLoadShed = (): void => loadShed.inc()

/** For load shedding: one sample of the event loop or the heap that failed. */
export const countSampleFailure = (): void => sampleFailures.inc()

export const metricsRegistry = client.register
