import type pg from 'pg'
import type { ListQuery, PlantPage } from '../storage.js'
import type { Guarded } from './create-plants.js'
import { plantJsonSql } from './plant-json-sql.js'
import { ReadBatcher } from './read-batcher.js'
import type { ReplicaReads } from './replica-reads.js'

const PLANT_JSON = plantJsonSql('p')

/** Most reads of one kind sent as one statement. */
const MAX_BATCH = 256

/** Plants by id, for a batch of distinct ids; `n` numbers them as given. */
const BY_ID = `SELECT q.n, ${PLANT_JSON} FROM unnest($1::int8[]) WITH ORDINALITY AS q(id, n)
  JOIN plants p ON p.id = q.id`

/**
 * Keyset pages for a batch of requests (the columns of `q`: lim, and tag and after as the filter
 * has them), each a plain index range scan: its JSON text, its last id and whether more plants
 * follow (asked only for a full page, as the next id in index order: an EXISTS was planned as a
 * sequential scan).
 */
function pages(input: string, columns: string, filter: string, next: string): string {
  return `SELECT q.n, page.json, page.last_id,
      page.count = q.lim AND (SELECT id FROM plants p WHERE ${next}p.id > page.last_id ORDER BY id LIMIT 1) IS NOT NULL
    FROM ${input} WITH ORDINALITY AS q(${columns}, n)
    CROSS JOIN LATERAL (
      SELECT '[' || coalesce(string_agg(plant, ',' ORDER BY id), '') || ']' AS json, max(id) AS last_id, count(*) AS count
      FROM (SELECT p.id, ${PLANT_JSON} AS plant FROM plants p ${filter} ORDER BY p.id LIMIT q.lim) rows
    ) page`
}

/** The page statements, by filter; $1 the row limits, then the tags and the cursors. Exported for the plan test. */
export const listPlantsPgSql = {
  first: pages('unnest($1::int8[])', 'lim', '', ''),
  after: pages('unnest($1::int8[], $2::int8[])', 'lim, after', 'WHERE p.id > q.after', ''),
  tagFirst: pages('unnest($1::int8[], $2::text[])', 'lim, tag', 'WHERE p.tag = q.tag', 'p.tag = q.tag AND '),
  tagAfter: pages(
    'unnest($1::int8[], $2::text[], $3::int8[])',
    'lim, tag, after',
    'WHERE p.tag = q.tag AND p.id > q.after',
    'p.tag = q.tag AND ',
  ),
} as const

type Shape = keyof typeof listPlantsPgSql

/** Plant reads as JSON text, batched per turn of the event loop (see ReadBatcher). */
export class PlantReads {
  private readonly byIds: ReadBatcher<bigint, string | undefined>
  private readonly pageBatches: Record<Shape, ReadBatcher<ListQuery, PlantPage>>

  constructor(
    private readonly pool: pg.Pool,
    private readonly guarded: Guarded,
    /** With DATABASE_READ_URL: where the batches go first. */
    private readonly replica?: ReplicaReads,
  ) {
    this.byIds = new ReadBatcher((ids) => this.readByIds(ids), String, MAX_BATCH)
    const batcher = (shape: Shape) =>
      new ReadBatcher<ListQuery, PlantPage>(
        (queries) => this.readPages(shape, queries),
        (q) => `${q.limit}/${q.after ?? ''}/${q.tag ?? ''}`,
        MAX_BATCH,
      )
    this.pageBatches = {
      first: batcher('first'),
      after: batcher('after'),
      tagFirst: batcher('tagFirst'),
      tagAfter: batcher('tagAfter'),
    }
  }

  /** The rows of a batch statement of `count` reads, each led by its input's 1-based ordinal. */
  private async rows(name: string, text: string, values: unknown[], count: number): Promise<unknown[][]> {
    const statement: pg.QueryArrayConfig = { name, text, values, rowMode: 'array' }
    if (this.replica) return this.replica.rows(statement, count)
    return (await this.guarded(() => this.pool.query(statement))).rows
  }

  private async readByIds(ids: bigint[]): Promise<(string | undefined)[]> {
    const found: (string | undefined)[] = new Array(ids.length)
    for (const [n, json] of await this.rows('plants-json', BY_ID, [ids], ids.length))
      found[Number(n) - 1] = json as string
    return found
  }

  private async readPages(shape: Shape, queries: ListQuery[]): Promise<PlantPage[]> {
    const values: unknown[] = [queries.map((q) => q.limit)]
    if (shape === 'tagFirst' || shape === 'tagAfter') values.push(queries.map((q) => q.tag))
    if (shape === 'after' || shape === 'tagAfter') values.push(queries.map((q) => q.after))
    const found: PlantPage[] = new Array(queries.length)
    for (const [n, json, lastId, more] of await this.rows(
      `plants-${shape}`,
      listPlantsPgSql[shape],
      values,
      queries.length,
    )) {
      found[Number(n) - 1] = {
        json: json as string,
        lastId: (lastId as bigint | null) ?? undefined,
        more: more === true,
      }
    }
    return found
  }

  byId(id: bigint): Promise<string | undefined> {
    return this.byIds.get(id)
  }

  page(query: ListQuery): Promise<PlantPage> {
    const shape: Shape =
      query.tag === undefined
        ? query.after === undefined
          ? 'first'
          : 'after'
        : query.after === undefined
          ? 'tagFirst'
          : 'tagAfter'
    return this.pageBatches[shape].get(query)
  }
}
