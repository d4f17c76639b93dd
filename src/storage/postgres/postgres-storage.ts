import type {
  AttemptResult,
  ClaimRequest,
  CreateOutcome,
  Delivery,
  DeliveryAttempt,
  LeasedDelivery,
  ListQuery,
  Plant,
  PlantLines,
  PlantPage,
  Storage,
  Subscription,
  TokenRecord,
} from '../storage.js'
import type pg from 'pg'
import { requestStartedAt } from '../request-scope.js'
import { StoreReadOnlyError } from '../storage.js'
import { CreateBatcher } from './create-batcher.js'
import { createPlants } from './create-plants.js'
import {
  CLIENT_DEADLINE_MARGIN_MS,
  createPool,
  hostChooserFor,
  type PostgresOptions,
  splitPoolSize,
} from './connection.js'
import { guard, type RetryPolicy } from './guard.js'
import { exportPlants, requeueFailedDeliveries } from './data-moves.js'
import { migratePostgres } from './migrations.js'
import { PlantReads } from './plant-reads.js'
import { ReplicaReads } from './replica-reads.js'
import { RECORDABLE, type Row, toAttempt, toDelivery, toToken } from './rows.js'

export { createPool, isUnavailableError, type PostgresOptions } from './connection.js'
export { migratePostgres } from './migrations.js'

/**
 * Create batches one instance runs at once, and creates per batch. Two keep a remote server busy
 * (one committing while the next is sent) and leave the rest of the pool to reads and webhooks;
 * the batcher runs one at a time while the event loop is saturated (see CreateBatcher.limit).
 */
const MAX_BATCHES_IN_FLIGHT = 2
const MAX_BATCH = 256

/**
 * Opens the pool, checks the server version and applies pending migrations. Throws
 * StoreUnavailableError when the server cannot be reached. The pool needs no supervision later:
 * it drops connections that fail and opens new ones on demand, so after an outage the next query
 * simply reconnects.
 */
export async function openPostgresStorage(options: PostgresOptions): Promise<Storage> {
  const chooser = hostChooserFor(options.url)
  const sizes = splitPoolSize(options.poolSize, options.readUrl !== undefined)
  const pool = createPool({ ...options, poolSize: sizes.primary }, true, chooser)
  try {
    // Retried as a request is, so a failover or a host of the wrong role in progress is waited out.
    const { rows } = await guard(
      () => pool.query("SELECT current_setting('server_version_num')::int AS version"),
      Date.now() + options.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS,
      { idempotent: true, attempts: options.poolSize + 1 },
    )
    // gen_random_uuid() (delivery ids) is built in from PostgreSQL 13.
    if (!rows[0] || (rows[0].version as number) < 130000)
      throw new Error('PostgreSQL 13 or later is required')
    // No deadline: DDL on a large table, or waiting for another instance's migration, takes long.
    const migrations = createPool({ ...options, poolSize: 1 }, false, chooser)
    await guard(() => migratePostgres(migrations, options.onMigration)).finally(() => migrations.end())
  } catch (error) {
    await pool.end().catch(() => {})
    throw error
  }
  // Not checked at start: a replica that cannot answer leaves the reads to the primary.
  let replica: { pool: pg.Pool; hosts: number } | undefined
  if (options.readUrl !== undefined) {
    const readChooser = hostChooserFor(options.readUrl, 'DATABASE_READ_URL')
    replica = {
      pool: createPool({ ...options, url: options.readUrl, poolSize: sizes.read }, true, readChooser),
      hosts: readChooser?.list.hosts.length ?? 1,
    }
  }
  return new PostgresStorage(pool, { ...options, poolSize: sizes.primary }, replica)
}

/**
 * The networked store: a pg pool; safe to share between any number of instances. Every method is
 * a single SQL statement, atomic on its own and one round trip; the frequent ones are named, so
 * each connection parses and plans them once.
 */
export class PostgresStorage implements Storage {
  readonly kind = 'postgres'
  readonly warnings: readonly string[] = []

  private readonly readPool?: pg.Pool
  private readonly creates: CreateBatcher
  private readonly reads: PlantReads

  /** DB_STATEMENT_TIMEOUT_MS plus a margin (CLIENT_DEADLINE_MARGIN_MS), counted from a request's arrival. */
  private readonly deadlineMs: number

  /** Every pooled connection may be dead after a database restart: see retriedOnDeadConnection. */
  private readonly retryAttempts: number

  constructor(
    private readonly pool: pg.Pool,
    /** `poolSize` is the primary pool's. */
    options: PostgresOptions,
    /** With DATABASE_READ_URL: the replica's pool and its host count, for plant reads (replica-reads.ts). */
    replica?: { pool: pg.Pool; hosts: number },
  ) {
    this.readPool = replica?.pool
    this.deadlineMs = options.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS
    this.retryAttempts = options.poolSize + 1
    this.creates = new CreateBatcher(
      (batch, until) => createPlants(this.pool, batch, (work) => guard(work, until, this.policy(true))),
      MAX_BATCHES_IN_FLIGHT,
      MAX_BATCH,
      options.observer,
    )
    // A batch of reads runs in the context of its first read, so under that request's deadline.
    const guarded = <T>(work: () => Promise<T>) => this.guardIdempotent(work)
    const replicaReads =
      replica &&
      new ReplicaReads(
        pool,
        replica,
        guarded,
        () => this.until(),
        { idempotent: true, attempts: replica.pool.options.max + 1, waits: false },
        options.readObserver,
      )
    this.reads = new PlantReads(pool, guarded, replicaReads)
  }

  /**
   * One deadline per request: every store call of a request ends by its arrival plus deadlineMs,
   * so a token lookup and a create cannot each take the whole of it. Outside a request (the CLI,
   * the webhook worker), each call gets the whole of it.
   */
  private until(): number {
    return (requestStartedAt() ?? Date.now()) + this.deadlineMs
  }

  private policy(idempotent: boolean): RetryPolicy {
    return { idempotent, attempts: this.retryAttempts }
  }

  private guard<T>(work: () => Promise<T>): Promise<T> {
    return guard(work, this.until(), this.policy(false))
  }

  /** For statements that may safely run twice: reads, and creates (a replay answers the same). */
  private guardIdempotent<T>(work: () => Promise<T>): Promise<T> {
    return guard(work, this.until(), this.policy(true))
  }

  /** The rows of one statement, named (prepared once per connection) when `name` is given. */
  private async rows(text: string, values: unknown[], idempotent: boolean, name?: string) {
    const run = () => this.pool.query({ text, values, name })
    const result = await (idempotent ? this.guardIdempotent(run) : this.guard(run))
    return result.rows as Row[]
  }

  private async count(text: string, values: unknown[], name?: string): Promise<number> {
    const result = await this.guard(() => this.pool.query({ text, values, name }))
    return result.rowCount ?? 0
  }

  createPlant(plant: Plant): Promise<CreateOutcome> {
    return this.creates.submit(plant, this.until())
  }

  readPlantJson(id: bigint): Promise<string | undefined> {
    return this.reads.byId(id)
  }

  listPlantsJson(query: ListQuery): Promise<PlantPage> {
    return this.reads.page(query)
  }

  exportPlants(after: bigint | undefined, limit: number): Promise<PlantLines> {
    return exportPlants((text, values) => this.rows(text, values, true, 'plant-export'), after, limit)
  }

  /** Not retried after a lost connection: the retry would report as not requeued what was. */
  requeueFailedDeliveries(ids: readonly string[] | undefined, now: Date): Promise<string[]> {
    return requeueFailedDeliveries((text, values) => this.rows(text, values, false), ids, now)
  }

  async deletePlant(id: bigint): Promise<boolean> {
    return (await this.count('DELETE FROM plants WHERE id = $1', [id], 'plant-delete')) === 1
  }

  async createToken(token: TokenRecord): Promise<void> {
    await this.count(
      `INSERT INTO tokens (id, name, scopes, token_hash, created_at, expires_at, last_used_at, revoked_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [
        token.id,
        token.name,
        token.scopes.join(','),
        token.hash,
        token.createdAt,
        token.expiresAt,
        token.lastUsedAt,
        token.revokedAt,
      ],
    )
  }

  async findTokenByHash(hash: string): Promise<TokenRecord | undefined> {
    const [row] = await this.rows('SELECT * FROM tokens WHERE token_hash = $1', [hash], true, 'token-by-hash')
    return row ? toToken(row) : undefined
  }

  async listTokens(): Promise<TokenRecord[]> {
    return (await this.rows('SELECT * FROM tokens ORDER BY created_at, id', [], true)).map(toToken)
  }

  async revokeToken(id: string): Promise<boolean> {
    const revoked = await this.count(
      'UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL',
      [new Date(), id],
    )
    return revoked === 1
  }

  async touchToken(id: string, at: Date): Promise<void> {
    await this.rows('UPDATE tokens SET last_used_at = $1 WHERE id = $2', [at, id], true, 'token-touch')
  }

  async countUsableTokens(now: Date): Promise<number> {
    const [row] = await this.rows(
      `SELECT count(*) AS n FROM tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $1)`,
      [now],
      true,
    )
    return Number(row?.n ?? 0)
  }

  async addSubscription(subscription: Subscription): Promise<void> {
    await this.count(
      'INSERT INTO webhook_subscriptions (id, url, secret, created_at) VALUES ($1, $2, $3, $4)',
      [subscription.id, subscription.url, subscription.secret, subscription.createdAt],
    )
  }

  async listSubscriptions(): Promise<Subscription[]> {
    const rows = await this.rows('SELECT * FROM webhook_subscriptions ORDER BY created_at, id', [], true)
    return rows.map((row) => ({
      id: row.id as string,
      url: row.url as string,
      secret: row.secret as string,
      createdAt: row.created_at as Date,
    }))
  }

  /**
   * Two statements, in this order. A create batch locks the subscriptions it enqueues for (FOR KEY
   * SHARE), so the DELETE waits for batches that are enqueueing for this one, and batches after it
   * no longer see it. Only then can a new snapshot see every pending delivery to fail: in one
   * statement, deliveries enqueued by a batch that committed while the removal ran stayed pending
   * forever, with no subscription to send them to. The second statement runs even when the first
   * removed nothing, so repeating a removal interrupted between the two finishes it.
   */
  async removeSubscription(id: string): Promise<boolean> {
    const removed = await this.count('DELETE FROM webhook_subscriptions WHERE id = $1', [id])
    await this.count(
      `UPDATE webhook_deliveries SET status = 'failed', last_error = 'subscription removed'
        WHERE subscription_id = $1 AND status = 'pending'
          AND NOT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE id = $1)`,
      [id],
    )
    return removed === 1
  }

  async claimDeliveries(request: ClaimRequest): Promise<LeasedDelivery[]> {
    const { now, owner, leaseUntil, limit, perSubscription, excludeSubscriptions } = request
    // Per subscriber, the oldest due deliveries that no live lease holds, at most perSubscription
    // of them; SKIP LOCKED passes over rows another instance is claiming right now instead of
    // waiting, and locking inside the LATERAL keeps the lock set bounded by what could be chosen.
    const rows = await this.rows(
      `WITH chosen AS (
          SELECT d.id FROM webhook_subscriptions s
          CROSS JOIN LATERAL (
            SELECT id, next_attempt_at FROM webhook_deliveries
            WHERE subscription_id = s.id AND status = 'pending' AND next_attempt_at <= $1
              AND (lease_until IS NULL OR lease_until < $1)
            ORDER BY next_attempt_at, id
            LIMIT $2
            FOR UPDATE SKIP LOCKED
          ) d
          WHERE s.id <> ALL($3::text[])
          ORDER BY d.next_attempt_at, d.id
          LIMIT $4
        )
        UPDATE webhook_deliveries w SET lease_owner = $5, lease_until = $6
        FROM chosen, webhook_subscriptions s
        WHERE w.id = chosen.id AND s.id = w.subscription_id
        RETURNING w.*, s.url, s.secret`,
      [now, perSubscription, excludeSubscriptions, limit, owner, leaseUntil],
      false,
      'deliveries-claim',
    )
    const leased = rows.map((row) => ({
      ...toDelivery(row),
      url: row.url as string,
      secret: row.secret as string,
    }))
    // RETURNING has no order; hand them out oldest first, as the SQLite adapter does.
    return leased.sort(
      (a, b) =>
        a.nextAttemptAt.getTime() - b.nextAttemptAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    )
  }

  async recordAttempt(result: AttemptResult): Promise<void> {
    const status = result.ok ? 'delivered' : result.retryAt ? 'pending' : 'failed'
    // One statement, so the history row and the delivery's count move together; a retry after a
    // lost connection finds the lease released and records nothing twice.
    // A delivery failed by a removal while its send was in flight is recordable too (RECORDABLE).
    const keeps = `(status = 'pending' OR $4::text = 'delivered')`
    await this.count(
      `WITH recorded AS (
          UPDATE webhook_deliveries
          SET attempts = attempts + 1, last_attempt_at = $1, last_status = $2,
              last_error = CASE WHEN ${keeps} THEN $3 ELSE last_error END,
              status = CASE WHEN ${keeps} THEN $4 ELSE status END,
              next_attempt_at = coalesce($5::timestamptz, next_attempt_at),
              lease_owner = NULL, lease_until = NULL
          WHERE id = $6 AND lease_owner = $7 AND ${RECORDABLE}
          RETURNING id, attempts
        )
        INSERT INTO webhook_attempts (delivery_id, attempt, at, status, error)
        SELECT id, attempts, $1, $2, $3 FROM recorded`,
      [result.at, result.status, result.error, status, result.retryAt, result.deliveryId, result.leaseOwner],
      'attempt-record',
    )
  }

  async listAttempts(deliveryIds: readonly string[], each: number): Promise<DeliveryAttempt[]> {
    const rows = await this.rows(
      `SELECT a.* FROM unnest($1::text[]) AS d(id)
        CROSS JOIN LATERAL (
          SELECT * FROM webhook_attempts WHERE delivery_id = d.id ORDER BY attempt DESC LIMIT $2
        ) a`,
      [[...deliveryIds], each],
      true,
    )
    return rows.map(toAttempt)
  }

  async webhookBacklog(): Promise<{ pending: number; oldestCreatedAt: Date | null }> {
    const [row] = await this.rows(
      // Both from the pending-by-age index (migration 4): the min is its first entry.
      `SELECT count(*)::int AS n, (SELECT min(created_at) FROM webhook_deliveries WHERE status = 'pending') AS oldest
       FROM webhook_deliveries WHERE status = 'pending'`,
      [],
      true,
      'webhook-backlog',
    )
    return { pending: Number(row?.n ?? 0), oldestCreatedAt: (row?.oldest as Date | null) ?? null }
  }

  async listDeliveries(options: { failedOnly: boolean; limit: number }): Promise<Delivery[]> {
    const where = options.failedOnly ? `WHERE status = 'failed'` : ''
    const rows = await this.rows(
      `SELECT * FROM webhook_deliveries ${where} ORDER BY created_at DESC, id LIMIT $1`,
      [options.limit],
      true,
    )
    return rows.map(toDelivery)
  }

  /** Both pools together, with a read pool. */
  poolStats(): { inUse: number; waiting: number } {
    const pools = this.readPool ? [this.pool, this.readPool] : [this.pool]
    return {
      inUse: pools.reduce((sum, pool) => sum + pool.totalCount - pool.idleCount, 0),
      waiting: pools.reduce((sum, pool) => sum + pool.waitingCount, 0),
    }
  }

  /** Ready means able to take writes too: a standby, or a primary set read-only, is not. */
  async ping(): Promise<void> {
    // Reads the table every plant route needs: a store without it is not ready to serve them.
    // No backoff: a readiness probe wants the state now, and has a short timeout of its own.
    const { rows } = await guard(
      () =>
        this.pool.query({
          name: 'ping',
          text: `SELECT current_setting('transaction_read_only') = 'on' AS read_only,
            EXISTS (SELECT 1 FROM plants) AS readable`,
        }),
      this.until(),
      { ...this.policy(true), waits: false },
    )
    const row = rows[0] as Row | undefined
    if (row?.read_only === true) {
      throw new StoreReadOnlyError(
        'PostgreSQL accepts no writes (transaction_read_only is on: a standby, or default_transaction_read_only)',
      )
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.end(), this.readPool?.end()])
  }
}
