import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import type {
  AttemptResult,
  ClaimRequest,
  CreateOutcome,
  Delivery,
  LeasedDelivery,
  ListQuery,
  Plant,
  Storage,
  Subscription,
  TokenRecord,
} from '../storage.js'
import { sqliteMigrations } from './migrations.js'

export interface SqliteOptions {
  path: string
  /** `full` fsyncs every commit (survives power loss); `normal` survives a process crash. */
  synchronous: 'full' | 'normal'
}

type Row = Record<string, unknown>

const toDate = (value: unknown): Date | null =>
  value === null || value === undefined ? null : new Date(Number(value))

function toPlant(row: Row): Plant {
  const plant: Plant = { id: row.id as bigint, name: row.name as string }
  if (row.tag !== null) plant.tag = row.tag as string
  return plant
}

function toToken(row: Row): TokenRecord {
  return {
    id: row.id as string,
    name: row.name as string,
    scopes: (row.scopes as string).split(',').filter(Boolean),
    hash: row.token_hash as string,
    createdAt: new Date(Number(row.created_at)),
    expiresAt: toDate(row.expires_at),
    lastUsedAt: toDate(row.last_used_at),
    revokedAt: toDate(row.revoked_at),
  }
}

function toDelivery(row: Row): Delivery {
  return {
    id: row.id as string,
    subscriptionId: row.subscription_id as string,
    plantId: BigInt(row.plant_id as bigint),
    payload: row.payload as string,
    status: row.status as Delivery['status'],
    attempts: Number(row.attempts),
    nextAttemptAt: new Date(Number(row.next_attempt_at)),
    lastAttemptAt: toDate(row.last_attempt_at),
    lastStatus: row.last_status === null ? null : Number(row.last_status),
    lastError: (row.last_error as string | null) ?? null,
    createdAt: new Date(Number(row.created_at)),
  }
}

/** Applies pending migrations; BEGIN IMMEDIATE serialises processes that start together. */
export function migrateSqlite(db: Database.Database): number[] {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
  const applied: number[] = []
  for (const migration of sqliteMigrations) {
    const run = db.transaction(() => {
      const done = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(migration.version)
      if (done) return
      db.exec(migration.sql)
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
        migration.version,
        migration.name,
        Date.now(),
      )
      applied.push(migration.version)
    })
    run.immediate()
  }
  return applied
}

/** Opens the file (creating its folder), sets WAL and the durability level, and migrates. */
export function openSqliteDatabase(options: SqliteOptions): Database.Database {
  fs.mkdirSync(path.dirname(options.path), { recursive: true })
  const db = new Database(options.path)
  db.pragma('journal_mode = WAL')
  db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`)
  db.pragma('busy_timeout = 5000')
  migrateSqlite(db)
  return db
}

/** The embedded store: one better-sqlite3 connection, WAL mode. */
export class SqliteStorage implements Storage {
  readonly kind = 'sqlite'
  private readonly db: Database.Database
  private readonly statements

  constructor(options: SqliteOptions) {
    this.db = openSqliteDatabase(options)
    const db = this.db
    const exact = (sql: string) => db.prepare(sql).safeIntegers(true)
    this.statements = {
      insertPlant: exact(
        'INSERT INTO plants (id, name, tag, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING',
      ),
      getPlant: exact('SELECT id, name, tag FROM plants WHERE id = ?'),
      deletePlant: exact('DELETE FROM plants WHERE id = ?'),
      enqueueDeliveries: exact(`INSERT INTO webhook_deliveries
          (id, subscription_id, plant_id, payload, status, attempts, next_attempt_at, created_at)
        SELECT 'msg_' || lower(hex(randomblob(16))), id, ?, ?, 'pending', 0, ?, ?
        FROM webhook_subscriptions`),
      // One statement per filter combination, so each is a plain index range scan.
      listFirst: exact('SELECT id, name, tag FROM plants ORDER BY id LIMIT ?'),
      listAfter: exact('SELECT id, name, tag FROM plants WHERE id > ? ORDER BY id LIMIT ?'),
      listTagFirst: exact('SELECT id, name, tag FROM plants WHERE tag = ? ORDER BY id LIMIT ?'),
      listTagAfter: exact('SELECT id, name, tag FROM plants WHERE tag = ? AND id > ? ORDER BY id LIMIT ?'),
      insertToken:
        db.prepare(`INSERT INTO tokens (id, name, scopes, token_hash, created_at, expires_at, last_used_at, revoked_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
      tokenByHash: db.prepare('SELECT * FROM tokens WHERE token_hash = ?'),
      listTokens: db.prepare('SELECT * FROM tokens ORDER BY created_at, id'),
      revokeToken: db.prepare('UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
      touchToken: db.prepare('UPDATE tokens SET last_used_at = ? WHERE id = ?'),
      countUsable: db.prepare(
        'SELECT count(*) AS n FROM tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)',
      ),
      insertSubscription: db.prepare(
        'INSERT INTO webhook_subscriptions (id, url, secret, created_at) VALUES (?, ?, ?, ?)',
      ),
      listSubscriptions: db.prepare('SELECT * FROM webhook_subscriptions ORDER BY created_at, id'),
      deleteSubscription: db.prepare('DELETE FROM webhook_subscriptions WHERE id = ?'),
      failSubscriptionDeliveries: db.prepare(`UPDATE webhook_deliveries
        SET status = 'failed', last_error = 'subscription removed', lease_owner = NULL, lease_until = NULL
        WHERE subscription_id = ? AND status = 'pending'`),
      recordAttempt: db.prepare(`UPDATE webhook_deliveries
        SET attempts = attempts + 1, last_attempt_at = ?, last_status = ?, last_error = ?,
            status = ?, next_attempt_at = coalesce(?, next_attempt_at), lease_owner = NULL, lease_until = NULL
        WHERE id = ? AND lease_owner = ? AND status = 'pending'`),
      ping: db.prepare('SELECT 1'),
    }
  }

  async createPlant(plant: Plant, payload: string): Promise<CreateOutcome> {
    const s = this.statements
    const create = this.db.transaction((): CreateOutcome => {
      const now = Date.now()
      const inserted = s.insertPlant.run(plant.id, plant.name, plant.tag ?? null, now).changes === 1
      if (inserted) {
        s.enqueueDeliveries.run(plant.id, payload, now, now)
        return { kind: 'created' }
      }
      const existing = toPlant(s.getPlant.get(plant.id) as Row)
      const same = existing.name === plant.name && existing.tag === plant.tag
      return same ? { kind: 'replayed' } : { kind: 'conflict', existing }
    })
    return create.immediate()
  }

  async getPlant(id: bigint): Promise<Plant | undefined> {
    const row = this.statements.getPlant.get(id) as Row | undefined
    return row ? toPlant(row) : undefined
  }

  async listPlants(query: ListQuery): Promise<Plant[]> {
    const s = this.statements
    const { after, tag, limit } = query
    let rows: unknown[]
    if (tag === undefined) rows = after === undefined ? s.listFirst.all(limit) : s.listAfter.all(after, limit)
    else rows = after === undefined ? s.listTagFirst.all(tag, limit) : s.listTagAfter.all(tag, after, limit)
    return (rows as Row[]).map(toPlant)
  }

  async deletePlant(id: bigint): Promise<boolean> {
    return this.statements.deletePlant.run(id).changes === 1
  }

  async createToken(token: TokenRecord): Promise<void> {
    this.statements.insertToken.run(
      token.id,
      token.name,
      token.scopes.join(','),
      token.hash,
      token.createdAt.getTime(),
      token.expiresAt?.getTime() ?? null,
      token.lastUsedAt?.getTime() ?? null,
      token.revokedAt?.getTime() ?? null,
    )
  }

  async findTokenByHash(hash: string): Promise<TokenRecord | undefined> {
    const row = this.statements.tokenByHash.get(hash) as Row | undefined
    return row ? toToken(row) : undefined
  }

  async listTokens(): Promise<TokenRecord[]> {
    return (this.statements.listTokens.all() as Row[]).map(toToken)
  }

  async revokeToken(id: string): Promise<boolean> {
    return this.statements.revokeToken.run(Date.now(), id).changes === 1
  }

  async touchToken(id: string, at: Date): Promise<void> {
    this.statements.touchToken.run(at.getTime(), id)
  }

  async countUsableTokens(now: Date): Promise<number> {
    return Number((this.statements.countUsable.get(now.getTime()) as Row).n)
  }

  async addSubscription(subscription: Subscription): Promise<void> {
    this.statements.insertSubscription.run(
      subscription.id,
      subscription.url,
      subscription.secret,
      subscription.createdAt.getTime(),
    )
  }

  async listSubscriptions(): Promise<Subscription[]> {
    return (this.statements.listSubscriptions.all() as Row[]).map((row) => ({
      id: row.id as string,
      url: row.url as string,
      secret: row.secret as string,
      createdAt: new Date(Number(row.created_at)),
    }))
  }

  async removeSubscription(id: string): Promise<boolean> {
    const remove = this.db.transaction(() => {
      const removed = this.statements.deleteSubscription.run(id).changes === 1
      if (removed) this.statements.failSubscriptionDeliveries.run(id)
      return removed
    })
    return remove.immediate()
  }

  async claimDeliveries(request: ClaimRequest): Promise<LeasedDelivery[]> {
    const excluded = request.excludeSubscriptions
    const claim = this.db.transaction(() => {
      const now = request.now.getTime()
      const rows = this.db
        .prepare(
          `SELECT * FROM (
             SELECT d.*, s.url, s.secret,
                    row_number() OVER (PARTITION BY d.subscription_id ORDER BY d.next_attempt_at) AS rank
             FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
             WHERE d.status = 'pending' AND d.next_attempt_at <= ?
               AND (d.lease_until IS NULL OR d.lease_until < ?)
               ${excluded.length ? `AND d.subscription_id NOT IN (${excluded.map(() => '?').join(',')})` : ''}
           ) WHERE rank <= ? ORDER BY next_attempt_at LIMIT ?`,
        )
        .safeIntegers(true)
        .all(now, now, ...excluded, request.perSubscription, request.limit) as Row[]
      const lease = this.db.prepare(
        'UPDATE webhook_deliveries SET lease_owner = ?, lease_until = ? WHERE id = ?',
      )
      for (const row of rows) lease.run(request.owner, request.leaseUntil.getTime(), row.id)
      return rows
    })
    return claim
      .immediate()
      .map((row) => ({ ...toDelivery(row), url: row.url as string, secret: row.secret as string }))
  }

  async recordAttempt(result: AttemptResult): Promise<void> {
    const status = result.ok ? 'delivered' : result.retryAt ? 'pending' : 'failed'
    this.statements.recordAttempt.run(
      result.at.getTime(),
      result.status,
      result.error,
      status,
      result.retryAt?.getTime() ?? null,
      result.deliveryId,
      result.leaseOwner,
    )
  }

  async listDeliveries(options: { failedOnly: boolean; limit: number }): Promise<Delivery[]> {
    const rows = this.db
      .prepare(
        `SELECT * FROM webhook_deliveries ${options.failedOnly ? "WHERE status = 'failed'" : ''}
         ORDER BY created_at DESC, id LIMIT ?`,
      )
      .safeIntegers(true)
      .all(options.limit) as Row[]
    return rows.map(toDelivery)
  }

  async ping(): Promise<void> {
    this.statements.ping.get()
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close()
  }
}
