/**
 * The storage port. Routes, the auth layer, the webhook worker and the CLI speak only this
 * interface; `storage/open.ts` is the one place that picks an adapter (SQLite or PostgreSQL).
 * Every adapter passes the same contract suite in `test/storage/`.
 */

import type { PlantFieldValues } from '../schemas/plant.js'

/** A plant: its exact id and the fields declared in schemas/plant.ts. */
export interface Plant extends PlantFieldValues {
  id: bigint
}

/** `created`: stored now. `replayed`: the same plant was already stored. `conflict`: the id holds another plant. */
export type CreateOutcome = { kind: 'created' } | { kind: 'replayed' } | { kind: 'conflict'; existing: Plant }

export interface ListQuery {
  /** Only ids strictly greater than this (keyset pagination). */
  after?: bigint
  tag?: string
  limit: number
}

/**
 * Reads come back as the JSON text the API sends (see plant-json.ts), so each adapter can produce
 * it the cheapest way it has: SQLite builds it in SQL, because turning rows into objects with
 * BigInt ids and serialising them again cost more than the query;
 * PostgreSQL builds it too, one text per plant or page. A page is an array of plants by id.
 */
export interface PlantPage {
  json: string
  /** The last plant's id, for the next page's cursor; undefined when the page is empty. */
  lastId: bigint | undefined
  /** True when more plants match after this page. */
  more: boolean
}

/** Plants as JSON text, one per plant (see plantJson), with the last one's id. */
export interface PlantLines {
  lines: string[]
  lastId: bigint | undefined
}

export interface TokenRecord {
  id: string
  name: string
  scopes: string[]
  /** Hex SHA-256 of the secret; the secret itself is never stored. */
  hash: string
  createdAt: Date
  expiresAt: Date | null
  lastUsedAt: Date | null
  revokedAt: Date | null
}

export interface Subscription {
  id: string
  url: string
  secret: string
  createdAt: Date
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed'

export interface Delivery {
  /** The Standard Webhooks `webhook-id`: one per event and subscriber, stable across retries. */
  id: string
  subscriptionId: string
  plantId: bigint
  /** The exact JSON body sent, with `id` printed digit for digit. */
  payload: string
  status: DeliveryStatus
  attempts: number
  nextAttemptAt: Date
  lastAttemptAt: Date | null
  lastStatus: number | null
  lastError: string | null
  createdAt: Date
}

/** One attempt at a delivery, as the worker recorded it. */
export interface DeliveryAttempt {
  deliveryId: string
  /** 1 for the first attempt; the delivery's `attempts` is the newest one's number. */
  attempt: number
  at: Date
  /** The subscriber's HTTP status; null when no answer came (a timeout, a refused connection). */
  status: number | null
  /** Why the attempt did not deliver; null when it did. */
  error: string | null
}

/** A delivery leased to one worker, with what it needs to send it. */
export interface LeasedDelivery extends Delivery {
  url: string
  secret: string
}

export interface ClaimRequest {
  owner: string
  now: Date
  leaseUntil: Date
  limit: number
  /** At most this many per subscriber in one claim, so one busy subscriber cannot take them all. */
  perSubscription: number
  /** Subscribers this worker is already saturated with; none of theirs are claimed. */
  excludeSubscriptions: string[]
}

export interface AttemptResult {
  deliveryId: string
  leaseOwner: string
  ok: boolean
  status: number | null
  error: string | null
  at: Date
  /** When to try again; null marks the delivery failed for good (or delivered when ok). */
  retryAt: Date | null
}

export interface Storage {
  /** `sqlite` or `postgres`, for logs and /readyz. */
  readonly kind: string
  /** What an operator should hear of at start: the service logs each as a warning. */
  readonly warnings: readonly string[]

  /**
   * Stores the plant unless its id is taken. On `created`, one outbox delivery per current webhook
   * subscriber, carrying the plant's JSON text (plant-json.ts), is written in the same transaction.
   * Resolves only once the transaction is durable.
   */
  createPlant(plant: Plant): Promise<CreateOutcome>
  /** The stored plant as the API's JSON text (see PlantPage), or undefined. */
  readPlantJson(id: bigint): Promise<string | undefined>
  /** One page of plants by ascending id, `query.limit` at most, as JSON text. */
  listPlantsJson(query: ListQuery): Promise<PlantPage>
  /** True when a plant was removed. */
  deletePlant(id: bigint): Promise<boolean>
  /**
   * Up to `limit` plants with ids above `after` (from the first when undefined), by ascending id,
   * each as the API's JSON text: `plant-store export` walks the store a page at a time with it.
   */
  exportPlants(after: bigint | undefined, limit: number): Promise<PlantLines>

  createToken(token: TokenRecord): Promise<void>
  findTokenByHash(hash: string): Promise<TokenRecord | undefined>
  listTokens(): Promise<TokenRecord[]>
  /** True when an active token was revoked. */
  revokeToken(id: string): Promise<boolean>
  touchToken(id: string, at: Date): Promise<void>
  countUsableTokens(now: Date): Promise<number>

  addSubscription(subscription: Subscription): Promise<void>
  listSubscriptions(): Promise<Subscription[]>
  /** True when it existed. Its pending deliveries are marked failed. */
  removeSubscription(id: string): Promise<boolean>
  /**
   * Leases up to `limit` due pending deliveries to `owner` until `leaseUntil`, skipping those
   * another live lease holds, so instances can share one outbox.
   */
  claimDeliveries(request: ClaimRequest): Promise<LeasedDelivery[]>
  /**
   * Records an attempt, in the delivery's row and in its attempt history, in one transaction;
   * ignored when the lease was lost to another owner.
   */
  recordAttempt(result: AttemptResult): Promise<void>
  /**
   * Puts failed deliveries back in the outbox, due at `now` and unleased, so a worker sends them
   * again under their own webhook-id as their next attempt. Those whose subscription was removed
   * stay failed. `ids` undefined means every failed delivery. Resolves with the ids requeued.
   */
  requeueFailedDeliveries(ids: readonly string[] | undefined, now: Date): Promise<string[]>
  /** The newest deliveries first. */
  listDeliveries(options: { failedOnly: boolean; limit: number }): Promise<Delivery[]>
  /** Pending deliveries and when the oldest of them was created (null when none), for metrics. */
  webhookBacklog(): Promise<{ pending: number; oldestCreatedAt: Date | null }>
  /** The newest `each` attempts of each of these deliveries, newest first per delivery. */
  listAttempts(deliveryIds: readonly string[], each: number): Promise<DeliveryAttempt[]>

  /** Connections of the driver's pool running a query, and queries waiting for one, for metrics. */
  poolStats?(): { inUse: number; waiting: number } | undefined
  /**
   * Calls `listener` once if the store stops taking writes for good (SQLite after a failed sync):
   * only a restart recovers it. A store that never does so need not implement it.
   */
  onFatal?(listener: (error: StoreUnavailableError) => void): void

  /** Resolves when the store can read its plants table (and, for a server, take writes). */
  ping(): Promise<void>
  /** Figures /readyz shows beside its status (SQLite: the WAL's size); none for PostgreSQL. */
  details?(): StoreDetails
  close(): Promise<void>
}

export interface StoreDetails {
  /** Bytes in SQLite's WAL file: near 4 MiB under steady writes, growing when checkpoints cannot finish. */
  walBytes?: number
}

/** Told of every group commit a store has answered, for metrics (observability/metrics.ts). */
export interface CommitObserver {
  /** `size` writes shared one commit, answered `durationMs` after it began. */
  batchCommitted(size: number, durationMs: number): void
}

/**
 * Where a plant read ran, with a read pool: on the replica, or on the primary because the replica
 * had not replayed the latest acknowledged write in time (`lagging`) or could not answer
 * (`unavailable`).
 */
export type ReadPlace = 'replica' | 'lagging' | 'unavailable'

/** Told where plant reads ran (observability/metrics.ts); `count` reads of one batch. */
export interface ReadObserver {
  readsRan(place: ReadPlace, count: number): void
}

/** Thrown by an adapter when the database cannot be reached; answered as 503 with Retry-After. */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError'
}

/**
 * The store stopped taking writes for good (SQLite after a failed sync or checkpoint, or files
 * moved away): only a restart recovers it. `reason` says why in words safe to show anyone (/readyz).
 */
export class StoreStoppedError extends StoreUnavailableError {
  override name = 'StoreStoppedError'
  constructor(
    message: string,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(message, options)
  }
}

/** The database answers but takes no writes (a standby, or a primary set read-only). */
export class StoreReadOnlyError extends StoreUnavailableError {
  override name = 'StoreReadOnlyError'
}

/** The database answers but could not write just now: a full disk, an I/O error. */
export class StoreWriteError extends StoreUnavailableError {
  override name = 'StoreWriteError'
}
