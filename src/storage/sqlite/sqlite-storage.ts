import type Database from 'better-sqlite3'
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
import { openSqliteDatabase, type Row, type SqliteOptions, toDelivery, toPlant, toToken } from './database.js'
import { SqliteWriter } from './writer-client.js'
import type { WriterStats } from './writer-protocol.js'

export { migrateSqlite, openSqliteDatabase, type SqliteOptions } from './database.js'
export type { WriterStats } from './writer-protocol.js'

/**
 * The embedded store, on one SQLite file in WAL mode with two connections. Reads run on this
 * thread's connection. Every write goes to the writer thread (`sqlite-writer.ts`), which
 * group-commits: creates that arrive together share one transaction and one fsync, and each is
 * answered only once that commit is durable. Keeping all writes there means this thread never
 * waits for the write lock (WAL lets reads go on during a commit), so the event loop stays free
 * and two writers of one process can never contend; other processes on the file are waited for
 * up to the busy timeout.
 */
/**
 * Keyset listing, one statement per filter combination so each is a plain index range scan with
 * no OFFSET and no sort: a page costs the same at plant 10 as at plant 10,000,000. Exported for
 * the query-plan test.
 */
export const listPlantsSql = {
  first: 'SELECT id, name, tag FROM plants ORDER BY id LIMIT ?',
  after: 'SELECT id, name, tag FROM plants WHERE id > ? ORDER BY id LIMIT ?',
  tagFirst: 'SELECT id, name, tag FROM plants WHERE tag = ? ORDER BY id LIMIT ?',
  tagAfter: 'SELECT id, name, tag FROM plants WHERE tag = ? AND id > ? ORDER BY id LIMIT ?',
} as const

export class SqliteStorage implements Storage {
  readonly kind = 'sqlite'
  /** The writer thread; `writer.counters()` shows how writes were batched. */
  readonly writer: SqliteWriter
  private readonly db: Database.Database
  private readonly statements

  constructor(options: SqliteOptions) {
    this.db = openSqliteDatabase(options)
    // Started now so it is ready by the first write; the file is migrated already.
    this.writer = new SqliteWriter(options)
    this.writer.start().catch(() => {})
    const db = this.db
    const exact = (sql: string) => db.prepare(sql).safeIntegers(true)
    this.statements = {
      getPlant: exact('SELECT id, name, tag FROM plants WHERE id = ?'),
      listFirst: exact(listPlantsSql.first),
      listAfter: exact(listPlantsSql.after),
      listTagFirst: exact(listPlantsSql.tagFirst),
      listTagAfter: exact(listPlantsSql.tagAfter),
      tokenByHash: db.prepare('SELECT * FROM tokens WHERE token_hash = ?'),
      listTokens: db.prepare('SELECT * FROM tokens ORDER BY created_at, id'),
      countUsable: db.prepare(
        'SELECT count(*) AS n FROM tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)',
      ),
      listSubscriptions: db.prepare('SELECT * FROM webhook_subscriptions ORDER BY created_at, id'),
      ping: db.prepare('SELECT 1'),
    }
  }

  /** Counters of the writer thread: batches begun, committed and failed, and their sizes. */
  stats(): WriterStats {
    return this.writer.counters()
  }

  createPlant(plant: Plant, payload: string): Promise<CreateOutcome> {
    return this.writer.write({ op: 'createPlant', plant, payload })
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

  deletePlant(id: bigint): Promise<boolean> {
    return this.writer.write({ op: 'deletePlant', id })
  }

  createToken(token: TokenRecord): Promise<void> {
    return this.writer.write({ op: 'createToken', token })
  }

  async findTokenByHash(hash: string): Promise<TokenRecord | undefined> {
    const row = this.statements.tokenByHash.get(hash) as Row | undefined
    return row ? toToken(row) : undefined
  }

  async listTokens(): Promise<TokenRecord[]> {
    return (this.statements.listTokens.all() as Row[]).map(toToken)
  }

  revokeToken(id: string): Promise<boolean> {
    return this.writer.write({ op: 'revokeToken', id, at: Date.now() })
  }

  touchToken(id: string, at: Date): Promise<void> {
    return this.writer.write({ op: 'touchToken', id, at: at.getTime() })
  }

  async countUsableTokens(now: Date): Promise<number> {
    return Number((this.statements.countUsable.get(now.getTime()) as Row).n)
  }

  addSubscription(subscription: Subscription): Promise<void> {
    return this.writer.write({ op: 'addSubscription', subscription })
  }

  async listSubscriptions(): Promise<Subscription[]> {
    return (this.statements.listSubscriptions.all() as Row[]).map((row) => ({
      id: row.id as string,
      url: row.url as string,
      secret: row.secret as string,
      createdAt: new Date(Number(row.created_at)),
    }))
  }

  removeSubscription(id: string): Promise<boolean> {
    return this.writer.write({ op: 'removeSubscription', id })
  }

  async claimDeliveries(request: ClaimRequest): Promise<LeasedDelivery[]> {
    const rows = await this.writer.write<Row[]>({ op: 'claimDeliveries', request })
    return rows.map((row) => ({ ...toDelivery(row), url: row.url as string, secret: row.secret as string }))
  }

  recordAttempt(result: AttemptResult): Promise<void> {
    return this.writer.write({ op: 'recordAttempt', result })
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

  /** Healthy when the file answers a query and the writer thread is up (or could be started). */
  async ping(): Promise<void> {
    this.statements.ping.get()
    await this.writer.start()
  }

  /** Finishes every write already accepted, stops the writer, then closes the read connection. */
  async close(): Promise<void> {
    await this.writer.close()
    if (this.db.open) this.db.close()
  }
}
