import type pg from 'pg'
import type { ListQuery, PlantPage } from '../storage.js'
import type { Guarded } from './create-plants.js'

/**
 * A plant row as the API's JSON text (see plant-json.ts), built by PostgreSQL: to_json escapes a
 * string as JSON.stringify does, and an int8 prints exactly. One text column per plant, or one per
 * page, is far less for this process to parse than rows of three typed columns.
 */
const PLANT_JSON = `'{"id":' || id || ',"name":' || to_json(name) ||
  CASE WHEN tag IS NULL THEN '' ELSE ',"tag":' || to_json(tag) END || '}'`

/**
 * A keyset page as one row: its JSON text, its last id and whether more plants follow (asked only
 * for a full page, as the next id in index order: an EXISTS was planned as a sequential scan). One
 * statement per filter combination, each a plain index range scan.
 */
const page = (where: string, next: string) =>
  `SELECT json, last_id,
          n = $1 AND (SELECT id FROM plants WHERE ${next}id > last_id ORDER BY id LIMIT 1) IS NOT NULL AS more
   FROM (SELECT '[' || coalesce(string_agg(plant, ',' ORDER BY id), '') || ']' AS json,
                max(id) AS last_id, count(*) AS n
         FROM (SELECT id, ${PLANT_JSON} AS plant FROM plants ${where} ORDER BY id LIMIT $1) rows) page`

/** The page statements, by filter: $1 the row limit, then the tag and the cursor. Exported for the plan test. */
export const listPlantsPgSql = {
  first: page('', ''),
  after: page('WHERE id > $2', ''),
  tagFirst: page('WHERE tag = $2', 'tag = $2 AND '),
  tagAfter: page('WHERE tag = $2 AND id > $3', 'tag = $2 AND '),
} as const

const statements = {
  byId: { name: 'plant-json', text: `SELECT ${PLANT_JSON} FROM plants WHERE id = $1` },
  first: { name: 'plants-page', text: listPlantsPgSql.first },
  after: { name: 'plants-page-after', text: listPlantsPgSql.after },
  tagFirst: { name: 'plants-page-tag', text: listPlantsPgSql.tagFirst },
  tagAfter: { name: 'plants-page-tag-after', text: listPlantsPgSql.tagAfter },
} as const

/** Plant reads as JSON text, by named statements that return rows as arrays. */
export class PlantReads {
  constructor(
    private readonly pool: pg.Pool,
    private readonly guarded: Guarded,
  ) {}

  private async row(
    statement: { name: string; text: string },
    values: unknown[],
  ): Promise<unknown[] | undefined> {
    const result = await this.guarded(() =>
      this.pool.query<unknown[]>({ ...statement, values, rowMode: 'array' }),
    )
    return result.rows[0]
  }

  async byId(id: bigint): Promise<string | undefined> {
    return (await this.row(statements.byId, [id]))?.[0] as string | undefined
  }

  async page(query: ListQuery): Promise<PlantPage> {
    const { after, tag, limit } = query
    const row =
      tag === undefined
        ? after === undefined
          ? await this.row(statements.first, [limit])
          : await this.row(statements.after, [limit, after])
        : after === undefined
          ? await this.row(statements.tagFirst, [limit, tag])
          : await this.row(statements.tagAfter, [limit, tag, after])
    const [json, lastId, more] = row as [string, bigint | null, boolean | null]
    return { json, lastId: lastId ?? undefined, more: more === true }
  }
}
