import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'
import { listPlantsPgSql } from '../../src/storage/postgres/plant-reads.js'
import { createPool, migratePostgres } from '../../src/storage/postgres/postgres-storage.js'
import { listPlantsSql, openSqliteDatabase } from '../../src/storage/sqlite/sqlite-storage.js'
import { fileDatabaseUrl, postgresHint, resetPostgres, skipUnless, tempDir } from '../helpers.js'
import { pgAdmin } from '../pg-admin.js'

/**
 * Listing must cost the same per page at any depth: an index range scan from the cursor, no OFFSET,
 * no sort of the whole table. A timed test would be noise on a shared machine; the query plan is
 * the proof, checked on a store large enough that a planner would prefer a scan if it could.
 */
describe('keyset listing uses an index range scan (sqlite)', () => {
  const db = openSqliteDatabase({ path: path.join(tempDir(), 'plan.db'), synchronous: 'normal' })
  db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
    INSERT INTO plants (id, name, tag, created_at) SELECT i, 'p' || i, 't' || (i % 10), 0 FROM n`)
  db.exec('ANALYZE')
  const plan = (sql: string) =>
    (
      db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...Array(sql.split('?').length - 1).fill(1)) as {
        detail: string
      }[]
    )
      .map((row) => row.detail)
      .join(' | ')

  const pageShapes = ['first', 'after', 'tagFirst', 'tagAfter'] as const
  for (const name of pageShapes) {
    it(`${name}: searches an index in order and never sorts`, () => {
      const detail = plan(listPlantsSql[name])
      assert.doesNotMatch(detail, /TEMP B-TREE/, detail)
      // The page is read by a co-routine, in index order, and concatenated in the order it yields.
      // The first untagged page walks the rowid b-tree in order and stops at LIMIT; every other
      // shape seeks into an index first.
      const inner =
        name === 'first'
          ? 'SCAN plants'
          : 'SEARCH plants USING (INTEGER PRIMARY KEY|(COVERING )?INDEX plants_tag_id)'
      assert.match(
        detail,
        new RegExp(`^CO-ROUTINE \\(subquery-1\\) \\| ${inner}[^|]* \\| SCAN \\(subquery-1\\)$`),
        detail,
      )
    })
  }
  for (const name of ['more', 'tagMore'] as const) {
    it(`${name}: one index seek`, () => {
      const detail = plan(listPlantsSql[name])
      assert.match(
        detail,
        / \| SEARCH plants USING (INTEGER PRIMARY KEY|COVERING INDEX plants_tag_id) \(.*[>]\?\)$/,
        detail,
      )
    })
  }

  it('pages through 100,000 plants completely with the cursor, each page in id order', () => {
    const first = db.prepare(listPlantsSql.first).safeIntegers(true).raw()
    const after = db.prepare(listPlantsSql.after).safeIntegers(true).raw()
    const ids = (row: unknown) =>
      (JSON.parse((row as [bigint, bigint, string])[2]) as { id: number }[]).map((p) => p.id)
    let page = ids(first.get(1000))
    let seen = 0
    let previous = 0
    while (page.length > 0) {
      for (const id of page) {
        assert.ok(id > previous, `${id} follows ${previous}`)
        previous = id
      }
      seen += page.length
      page = ids(after.get(previous, 1000))
    }
    assert.equal(seen, 100000)
    db.close()
  })
})

const skip = skipUnless(!!process.env.TEST_DATABASE_URL, 'TEST_DATABASE_URL', postgresHint)
describe('keyset listing uses an index range scan (postgres)', { skip }, () => {
  it('plans the adapter query shapes as index scans without a sort', async () => {
    const url = await fileDatabaseUrl()
    await resetPostgres()
    const sql = pgAdmin(url)
    const migrations = createPool({ url, poolSize: 1, statementTimeoutMs: 60_000 }, false)
    try {
      await migratePostgres(migrations)
      await sql`INSERT INTO plants (id, name, tag, created_at)
        SELECT i, 'p' || i, 't' || (i % 10), now() FROM generate_series(1, 200000) AS i`
      await sql`ANALYZE plants`
      // The adapter's batch statements, with the parameters pages of 100 (past id 150000) bind.
      const shapes = [
        [listPlantsPgSql.first, "'{101}'"],
        [listPlantsPgSql.after, "'{101, 101}', '{150000, 190000}'"],
        [listPlantsPgSql.tagFirst, "'{101}', '{t3}'"],
        [listPlantsPgSql.tagAfter, "'{101}', '{t3}', '{150000}'"],
      ]
      // The adapter's own connections never JIT-compile a statement (connection.ts).
      const { rows } = await migrations.query<{ jit: string }>('SHOW jit')
      assert.equal(rows[0]?.jit, 'off')
      for (const [i, [shape, values]] of shapes.entries()) {
        await sql.unsafe(`PREPARE shape${i} AS ${shape}`)
        const rows = await sql.unsafe(`EXPLAIN EXECUTE shape${i}(${values})`)
        const text = rows.map((row) => row['QUERY PLAN']).join('\n')
        assert.match(text, /Index (Only )?Scan using/, text)
        assert.doesNotMatch(text, /Sort|Seq Scan/, text)
      }
    } finally {
      await migrations.end()
      await sql.end()
      await resetPostgres()
    }
  })
})
