import type {
  AttemptResult,
  ClaimRequest,
  CreateOutcome,
  Delivery,
  DeliveryAttempt,
  LeasedDelivery,
  ListQuery,
  Plant,
  PlantPage,
  Storage,
  Subscription,
  TokenRecord,
} from '../storage.js'
import { StoreReadOnlyError } from '../storage.js'
import { plantJson } from '../plant-json.js'
import { CreateBatcher } from './create-batcher.js'
import { createPlants } from './create-plants.js'
import { createPostgresClient, type PostgresOptions } from './connection.js'
import { CLIENT_DEADLINE_MARGIN_MS, guard } from './guard.js'
import { Reachability } from './reachability.js'
import { migratePostgres, type PgSql } from './migrations.js'
import { RECORDABLE, toAttempt, toDelivery, toPlant, toToken } from './rows.js'

export { createPostgresClient, isUnavailableError, type PostgresOptions } from './connection.js'
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
 * postgres.js opens connections lazily, so after an outage the next query simply reconnects.
 */
export async function openPostgresStorage(options: PostgresOptions): Promise<Storage> {
  const sql = createPostgresClient(options)
  try {
    const [row] = await guard(
      () => sql`SELECT current_setting('server_version_num')::int AS version`,
      options.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS,
    )
    // gen_random_uuid() (delivery ids) is built in from PostgreSQL 13.
    if (!row || (row.version as number) < 130000) throw new Error('PostgreSQL 13 or later is required')
    // No deadline: DDL on a large table, or waiting for another instance's migration, takes long.
    await guard(() => migratePostgres(sql))
  } catch (error) {
    await sql.end({ timeout: 1 }).catch(() => {})
    throw error
  }
  return new PostgresStorage(sql, options)
}

/**
 * The networked store: a postgres.js pool; safe to share between any number of instances.
 *
 * Every method is a single SQL statement (atomic on its own), never `sql.begin()`: in postgres.js
 * 3.4.9, a connection lost inside `sql.begin()` makes the library write to a closed socket from a
 * timer, an uncaught TypeError that kills the process and leaves the pool slot broken
 * (porsager/postgres#1133). Single statements fail cleanly and the pool reconnects.
 */
export class PostgresStorage implements Storage {
  readonly kind = 'postgres'
  readonly warnings: readonly string[] = []

  private readonly creates: CreateBatcher

  /** DB_STATEMENT_TIMEOUT_MS plus a margin: see CLIENT_DEADLINE_MARGIN_MS. */
  private readonly deadlineMs: number

  /** Every pooled connection may be dead after a database restart: see retriedOnDeadConnection. */
  private readonly retryAttempts: number

  constructor(
    private readonly sql: PgSql,
    options: PostgresOptions,
  ) {
    this.deadlineMs = options.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS
    this.retryAttempts = options.poolSize + 1
    this.creates = new CreateBatcher(
      (batch) => createPlants(this.sql, batch, (work) => this.guardIdempotent(work)),
      MAX_BATCHES_IN_FLIGHT,
      MAX_BATCH,
      this.deadlineMs,
      options.observer,
    )
  }

  /** Fails requests at once while the server is known to be unreachable: see Reachability. */
  private readonly reachability = new Reachability()

  private guard<T>(work: () => Promise<T>): Promise<T> {
    return guard(() => this.reachability.run(work), this.deadlineMs, {
      idempotent: false,
      attempts: this.retryAttempts,
    })
  }

  /** For statements that may safely run twice: reads, and creates (a replay answers the same). */
  private guardIdempotent<T>(work: () => Promise<T>): Promise<T> {
    return guard(() => this.reachability.run(work), this.deadlineMs, {
      idempotent: true,
      attempts: this.retryAttempts,
    })
  }

  createPlant(plant: Plant, payload: string): Promise<CreateOutcome> {
    return this.creates.submit(plant, payload)
  }

  async readPlantJson(id: bigint): Promise<string | undefined> {
    const [row] = await this.guardIdempotent(
      () => this.sql`SELECT id, name, tag FROM plants WHERE id = ${id}`,
    )
    return row ? plantJson(toPlant(row)) : undefined
  }

  /**
   * Plain rows, one past the page to learn whether a next page exists, turned into JSON text
   * here: measured with pgbench, having PostgreSQL build the text (to_json per row, string_agg)
   * cost the server more than sending the rows and cost this process about as much.
   */
  async listPlantsJson(query: ListQuery): Promise<PlantPage> {
    const { sql } = this
    const { after, tag, limit } = query
    const rows = await this.guardIdempotent(
      () => sql`SELECT id, name, tag FROM plants
        WHERE ${tag === undefined ? sql`TRUE` : sql`tag = ${tag}`}
          AND ${after === undefined ? sql`TRUE` : sql`id > ${after}`}
        ORDER BY id LIMIT ${limit + 1}`,
    )
    const page = rows.slice(0, limit).map(toPlant)
    return { json: `[${page.map(plantJson).join(',')}]`, lastId: page.at(-1)?.id, more: rows.length > limit }
  }

  async deletePlant(id: bigint): Promise<boolean> {
    const result = await this.guard(() => this.sql`DELETE FROM plants WHERE id = ${id}`)
    return result.count === 1
  }

  async createToken(token: TokenRecord): Promise<void> {
    await this.guard(
      () => this.sql`INSERT INTO tokens
          (id, name, scopes, token_hash, created_at, expires_at, last_used_at, revoked_at)
        VALUES (${token.id}, ${token.name}, ${token.scopes.join(',')}, ${token.hash}, ${token.createdAt},
                ${token.expiresAt}, ${token.lastUsedAt}, ${token.revokedAt})`,
    )
  }

  async findTokenByHash(hash: string): Promise<TokenRecord | undefined> {
    const [row] = await this.guardIdempotent(() => this.sql`SELECT * FROM tokens WHERE token_hash = ${hash}`)
    return row ? toToken(row) : undefined
  }

  async listTokens(): Promise<TokenRecord[]> {
    const rows = await this.guardIdempotent(() => this.sql`SELECT * FROM tokens ORDER BY created_at, id`)
    return rows.map(toToken)
  }

  async revokeToken(id: string): Promise<boolean> {
    const result = await this.guard(
      () => this.sql`UPDATE tokens SET revoked_at = ${new Date()} WHERE id = ${id} AND revoked_at IS NULL`,
    )
    return result.count === 1
  }

  async touchToken(id: string, at: Date): Promise<void> {
    await this.guardIdempotent(() => this.sql`UPDATE tokens SET last_used_at = ${at} WHERE id = ${id}`)
  }

  async countUsableTokens(now: Date): Promise<number> {
    const [row] = await this.guardIdempotent(
      () => this.sql`SELECT count(*) AS n FROM tokens
        WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${now})`,
    )
    return Number(row?.n ?? 0)
  }

  async addSubscription(subscription: Subscription): Promise<void> {
    await this.guard(
      () => this.sql`INSERT INTO webhook_subscriptions (id, url, secret, created_at)
        VALUES (${subscription.id}, ${subscription.url}, ${subscription.secret}, ${subscription.createdAt})`,
    )
  }

  async listSubscriptions(): Promise<Subscription[]> {
    const rows = await this.guardIdempotent(
      () => this.sql`SELECT * FROM webhook_subscriptions ORDER BY created_at, id`,
    )
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
    const removed = await this.guard(() => this.sql`DELETE FROM webhook_subscriptions WHERE id = ${id}`)
    await this.guard(
      () => this.sql`UPDATE webhook_deliveries
        SET status = 'failed', last_error = 'subscription removed'
        WHERE subscription_id = ${id} AND status = 'pending'
          AND NOT EXISTS (SELECT 1 FROM webhook_subscriptions WHERE id = ${id})`,
    )
    return removed.count === 1
  }

  async claimDeliveries(request: ClaimRequest): Promise<LeasedDelivery[]> {
    const { sql } = this
    const { now, owner, leaseUntil, limit, perSubscription, excludeSubscriptions } = request
    // Per subscriber, the oldest due deliveries that no live lease holds, at most perSubscription
    // of them; SKIP LOCKED passes over rows another instance is claiming right now instead of
    // waiting, and locking inside the LATERAL keeps the lock set bounded by what could be chosen.
    const rows = await this.guard(
      () => sql`WITH chosen AS (
          SELECT d.id FROM webhook_subscriptions s
          CROSS JOIN LATERAL (
            SELECT id, next_attempt_at FROM webhook_deliveries
            WHERE subscription_id = s.id AND status = 'pending' AND next_attempt_at <= ${now}
              AND (lease_until IS NULL OR lease_until < ${now})
            ORDER BY next_attempt_at, id
            LIMIT ${perSubscription}
            FOR UPDATE SKIP LOCKED
          ) d
          WHERE s.id <> ALL(${sql.array(excludeSubscriptions, 25)}::text[])
          ORDER BY d.next_attempt_at, d.id
          LIMIT ${limit}
        )
        UPDATE webhook_deliveries w SET lease_owner = ${owner}, lease_until = ${leaseUntil}
        FROM chosen, webhook_subscriptions s
        WHERE w.id = chosen.id AND s.id = w.subscription_id
        RETURNING w.*, s.url, s.secret`,
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
    const keeps = this.sql`status = 'pending' OR ${status} = 'delivered'`
    await this.guard(
      () => this.sql`WITH recorded AS (
          UPDATE webhook_deliveries
          SET attempts = attempts + 1, last_attempt_at = ${result.at}, last_status = ${result.status},
              last_error = CASE WHEN ${keeps} THEN ${result.error} ELSE last_error END,
              status = CASE WHEN ${keeps} THEN ${status} ELSE status END,
              next_attempt_at = coalesce(${result.retryAt}::timestamptz, next_attempt_at),
              lease_owner = NULL, lease_until = NULL
          WHERE id = ${result.deliveryId} AND lease_owner = ${result.leaseOwner} AND ${this.sql.unsafe(RECORDABLE)}
          RETURNING id, attempts
        )
        INSERT INTO webhook_attempts (delivery_id, attempt, at, status, error)
        SELECT id, attempts, ${result.at}, ${result.status}, ${result.error} FROM recorded`,
    )
  }

  async listAttempts(deliveryIds: readonly string[], each: number): Promise<DeliveryAttempt[]> {
    const { sql } = this
    const rows = await this.guardIdempotent(
      () => sql`SELECT a.* FROM unnest(${sql.array([...deliveryIds], 25)}::text[]) AS d(id)
        CROSS JOIN LATERAL (
          SELECT * FROM webhook_attempts WHERE delivery_id = d.id ORDER BY attempt DESC LIMIT ${each}
        ) a`,
    )
    return rows.map(toAttempt)
  }

  async webhookBacklog(): Promise<{ pending: number; oldestCreatedAt: Date | null }> {
    const [row] = await this.guardIdempotent(
      () => this.sql`SELECT count(*)::int AS n, min(created_at) AS oldest
        FROM webhook_deliveries WHERE status = 'pending'`,
    )
    return { pending: Number(row?.n ?? 0), oldestCreatedAt: (row?.oldest as Date | null) ?? null }
  }

  async listDeliveries(options: { failedOnly: boolean; limit: number }): Promise<Delivery[]> {
    const { sql } = this
    const rows = await this.guardIdempotent(
      () => sql`SELECT * FROM webhook_deliveries
        ${options.failedOnly ? sql`WHERE status = 'failed'` : sql``}
        ORDER BY created_at DESC, id LIMIT ${options.limit}`,
    )
    return rows.map(toDelivery)
  }

  /** Ready means able to take writes too: a standby, or a primary set read-only, is not. */
  async ping(): Promise<void> {
    const [row] = await this.guardIdempotent(
      () => this.sql`SELECT current_setting('transaction_read_only') = 'on' AS read_only`,
    )
    if (row?.read_only === true) {
      throw new StoreReadOnlyError(
        'PostgreSQL accepts no writes (transaction_read_only is on: a standby, or default_transaction_read_only)',
      )
    }
  }

  async close(): Promise<void> {
    // Waits up to 5 s for running queries, then closes the sockets regardless.
    await this.sql.end({ timeout: 5 })
  }
}
