import fs from 'node:fs'
import type Database from 'better-sqlite3'
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
  StoreDetails,
  StoreUnavailableError,
  Subscription,
  TokenRecord,
} from '../storage.js'
import { plantJsonSql } from '../plant-json.js'
import type { Row } from '../rows.js'
import { openSqliteDatabase, type SqliteOptions, toAttempt, toDelivery, toToken } from './database.js'
import { GroupCommitWriter, type WriterStats } from './group-commit.js'
import { PageCache } from './page-cache.js'
import { StoreFiles } from './store-files.js'

export { migrateSqlite, openSqliteDatabase, type SqliteOptions } from './database.js'
export type { WriterStats } from './group-commit.js'

/** The pending deliveries, read through the index that holds only them, ordered by age. */
const PENDING_BY_AGE = "webhook_deliveries INDEXED BY webhook_deliveries_pending_age WHERE status = 'pending'"

/** A plant row as the API's JSON text (see PlantPage): integer ids print exactly in SQLite. */
const PLANT_JSON = plantJsonSql((column) => `json_quote(${column})`)

/**
 * Keyset listing, one statement per filter combination so each is a plain index range scan with
 * no OFFSET and no sort: a page costs the same at plant 10 as at plant 10,000,000. The page is
 * read by a co-routine in index order and concatenated in the order it yields; the query-plan
 * test pins that plan, so a SQLite that planned it differently would fail the test, not reorder
 * a page. Exported for that test.
 */
const page = (where: string) =>
  `SELECT count(*), max(id), '[' || coalesce(group_concat(plant, ','), '') || ']'
   FROM (SELECT id, ${PLANT_JSON} AS plant FROM plants ${where} ORDER BY id LIMIT ?)`
export const listPlantsSql = {
  first: page(''),
  after: page('WHERE id > ?'),
  tagFirst: page('WHERE tag = ?'),
  tagAfter: page('WHERE tag = ? AND id > ?'),
  /** Whether a full page has a successor, asked only then. */
  more: 'SELECT EXISTS (SELECT 1 FROM plants WHERE id > ?)',
  tagMore: 'SELECT EXISTS (SELECT 1 FROM plants WHERE tag = ? AND id > ?)',
} as const

/**
 * The embedded store, on one SQLite file in WAL mode. Reads run on this thread's read connection.
 * Every write goes through the group-commit writer (`group-commit.ts`): writes that arrive
 * together share one transaction and one sync, made by SQLite itself, and each is answered only
 * once COMMIT returned. The write connection lives in a thread of its own (`writer-thread.ts`),
 * where SQLite also checkpoints the WAL, so that neither syncs nor checkpoints block reads.
 */
export class SqliteStorage implements Storage {
  readonly kind = 'sqlite'
  readonly warnings: readonly string[] = []
  private readonly writer: GroupCommitWriter
  private readonly files: StoreFiles
  private readonly wal: string
  private readonly db: Database.Database
  private readonly statements
  private readonly pages = new PageCache()
  private broken: StoreUnavailableError | undefined
  private readonly brokenListeners: Array<(error: StoreUnavailableError) => void> = []

  constructor(options: SqliteOptions) {
    this.db = openSqliteDatabase(options)
    const db = this.db
    let files: StoreFiles | undefined
    try {
      // Reading the schema makes SQLite create the WAL and the shared memory if they do not exist yet.
      db.prepare('SELECT count(*) FROM sqlite_schema').get()
      files = new StoreFiles(options.path)
      this.writer = new GroupCommitWriter(options, files, (error) => this.brokeDown(error))
    } catch (error) {
      db.close()
      files?.close()
      throw error
    }
    this.files = files
    this.wal = `${options.path}-wal`
    const exact = (sql: string) => db.prepare(sql).safeIntegers(true)
    this.statements = {
      plantJson: db.prepare(`SELECT ${PLANT_JSON} FROM plants WHERE id = ?`).pluck(),
      listFirst: exact(listPlantsSql.first).raw(),
      listAfter: exact(listPlantsSql.after).raw(),
      listTagFirst: exact(listPlantsSql.tagFirst).raw(),
      listTagAfter: exact(listPlantsSql.tagAfter).raw(),
      exportFirst: exact(`SELECT id, ${PLANT_JSON} FROM plants ORDER BY id LIMIT ?`).raw(),
      exportAfter: exact(`SELECT id, ${PLANT_JSON} FROM plants WHERE id > ? ORDER BY id LIMIT ?`).raw(),
      more: db.prepare(listPlantsSql.more).pluck(),
      tagMore: db.prepare(listPlantsSql.tagMore).pluck(),
      tokenByHash: db.prepare('SELECT * FROM tokens WHERE token_hash = ?'),
      listTokens: db.prepare('SELECT * FROM tokens ORDER BY created_at, id'),
      countUsable: db.prepare(
        'SELECT count(*) AS n FROM tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)',
      ),
      listSubscriptions: db.prepare('SELECT * FROM webhook_subscriptions ORDER BY created_at, id'),
      // Reads the table every plant route needs: a store without it is not ready to serve them.
      ping: db.prepare('SELECT 1 FROM plants LIMIT 1'),
      dataVersion: db.prepare('PRAGMA data_version').pluck(),
    }
  }

  /** Counters of the writer: batches begun, committed and failed, their sizes. */
  stats(): WriterStats {
    return this.writer.stats()
  }

  onFatal(listener: (error: StoreUnavailableError) => void): void {
    if (this.broken) listener(this.broken)
    else this.brokenListeners.push(listener)
  }

  private brokeDown(error: StoreUnavailableError): void {
    this.broken = error
    for (const listener of this.brokenListeners.splice(0)) listener(error)
  }

  createPlant(plant: Plant): Promise<CreateOutcome> {
    return this.writer.write({ op: 'createPlant', plant })
  }

  readPlantJson(id: bigint): Promise<string | undefined> {
    return this.read(() => this.statements.plantJson.get(id) as string | undefined)
  }

  listPlantsJson(query: ListQuery): Promise<PlantPage> {
    return this.read(() => this.listNow(query))
  }

  private listNow(query: ListQuery): PlantPage {
    const s = this.statements
    const { after, tag, limit } = query
    // Only first pages are cached: every client starts there, while a page behind a cursor is
    // read once per walk, and keeping those would only feed the garbage collector.
    const key = after === undefined ? `${limit}/${tag ?? ''}` : undefined
    if (key !== undefined) {
      const cached = this.pages.get(key, s.dataVersion.get() as number)
      if (cached) return cached
    }
    let row: unknown
    if (tag === undefined) row = after === undefined ? s.listFirst.get(limit) : s.listAfter.get(after, limit)
    else row = after === undefined ? s.listTagFirst.get(tag, limit) : s.listTagAfter.get(tag, after, limit)
    const [count, lastId, json] = row as [bigint, bigint | null, string]
    const more =
      lastId !== null &&
      Number(count) === limit &&
      (tag === undefined ? s.more.get(lastId) : s.tagMore.get(tag, lastId)) === 1
    const page = { json, lastId: lastId ?? undefined, more }
    if (key !== undefined) this.pages.set(key, page)
    return page
  }

  deletePlant(id: bigint): Promise<boolean> {
    return this.writer.write({ op: 'deletePlant', id })
  }

  exportPlants(after: bigint | undefined, limit: number): Promise<PlantLines> {
    return this.read(() => {
      const s = this.statements
      const rows = (after === undefined ? s.exportFirst.all(limit) : s.exportAfter.all(after, limit)) as [
        bigint,
        string,
      ][]
      return { lines: rows.map((row) => row[1]), lastId: rows.at(-1)?.[0] }
    })
  }

  createToken(token: TokenRecord): Promise<void> {
    return this.writer.write({ op: 'createToken', token })
  }

  findTokenByHash(hash: string): Promise<TokenRecord | undefined> {
    return this.read(() => {
      const row = this.statements.tokenByHash.get(hash) as Row | undefined
      return row ? toToken(row) : undefined
    })
  }

  listTokens(): Promise<TokenRecord[]> {
    return this.read(() => (this.statements.listTokens.all() as Row[]).map(toToken))
  }

  revokeToken(id: string): Promise<boolean> {
    return this.writer.write({ op: 'revokeToken', id, at: Date.now() })
  }

  touchToken(id: string, at: Date): Promise<void> {
    return this.writer.write({ op: 'touchToken', id, at: at.getTime() })
  }

  countUsableTokens(now: Date): Promise<number> {
    return this.read(() => Number((this.statements.countUsable.get(now.getTime()) as Row).n))
  }

  addSubscription(subscription: Subscription): Promise<void> {
    return this.writer.write({ op: 'addSubscription', subscription })
  }

  listSubscriptions(): Promise<Subscription[]> {
    return this.read(() =>
      (this.statements.listSubscriptions.all() as Row[]).map((row) => ({
        id: row.id as string,
        url: row.url as string,
        secret: row.secret as string,
        createdAt: new Date(Number(row.created_at)),
      })),
    )
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

  requeueFailedDeliveries(ids: readonly string[] | undefined, now: Date): Promise<string[]> {
    return this.writer.write({ op: 'requeueFailed', ids, now: now.getTime() })
  }

  listDeliveries(options: { failedOnly: boolean; limit: number }): Promise<Delivery[]> {
    return this.read(() => {
      const rows = this.db
        .prepare(
          `SELECT * FROM webhook_deliveries ${options.failedOnly ? "WHERE status = 'failed'" : ''}
           ORDER BY created_at DESC, id LIMIT ?`,
        )
        .safeIntegers(true)
        .all(options.limit) as Row[]
      return rows.map(toDelivery)
    })
  }

  webhookBacklog(): Promise<{ pending: number; oldestCreatedAt: Date | null }> {
    return this.read(() => {
      // One statement on the pending-by-age index (migration 5): a bare count(*) counts its entries
      // without reading rows, and the subquery's min is its first entry. Without statistics the
      // planner would take the (status, next_attempt_at) index and read every pending row instead.
      const row = this.db
        .prepare(
          `SELECT count(*) AS n, (SELECT min(created_at) FROM ${PENDING_BY_AGE}) AS oldest FROM ${PENDING_BY_AGE}`,
        )
        .get() as Row
      return {
        pending: Number(row.n),
        oldestCreatedAt: row.oldest === null ? null : new Date(Number(row.oldest)),
      }
    })
  }

  listAttempts(deliveryIds: readonly string[], each: number): Promise<DeliveryAttempt[]> {
    return this.read(() => {
      const newest = this.db.prepare(
        'SELECT * FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt DESC LIMIT ?',
      )
      return deliveryIds.flatMap((id) => (newest.all(id, each) as Row[]).map(toAttempt))
    })
  }

  /** The WAL's size: the writer thread checkpoints it back to 0 bytes past 1000 pages. */
  details(): StoreDetails {
    return { walBytes: fs.statSync(this.wal, { throwIfNoEntry: false })?.size ?? 0 }
  }

  /** Healthy when the plants table can be read and the writer takes writes. */
  async ping(): Promise<void> {
    this.statements.ping.get()
    this.writer.check()
  }

  private read<T>(run: () => T): Promise<T> {
    try {
      return Promise.resolve(run())
    } catch (error) {
      return Promise.reject(error as Error)
    }
  }

  /**
   * Finishes every write already accepted, then closes SQLite's connections (the writer thread's,
   * checkpointed first, then the reader's) and only then this process's own descriptors on the
   * store's files: closing any descriptor of a file drops the process's POSIX locks on it, which
   * SQLite still relies on while a connection is open.
   *
   * After a failed sync or checkpoint the reader stays open until the process exits: the last
   * connection to close checkpoints the WAL into the database file and deletes it, and a sync that
   * seems to succeed after a failed one may have lost pages; left alone, the next start replays it.
   */
  async close(): Promise<void> {
    try {
      await this.writer.close()
    } finally {
      if (!this.writer.keepsWal) {
        if (this.db.open) this.db.close()
        this.files.close()
      }
    }
  }
}
