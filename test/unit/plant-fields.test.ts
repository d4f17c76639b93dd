/**
 * A plant's fields are declared once (schemas/plant.ts): the schemas, the projections, the replay
 * comparison and both stores' SQL follow from the list. The builders are run here with the
 * declaration plus one more field, as a new field would arrive, on a real SQLite database and,
 * with TEST_DATABASE_URL, a real PostgreSQL one.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import Database from 'better-sqlite3'
import pg from 'pg'
import {
  NewPlant,
  Plant,
  type PlantField,
  type PlantFieldValues,
  fieldWords,
  plantFieldSchemas,
  plantFields,
  plantFieldWords,
  StoredPlant,
} from '../../src/schemas/plant.js'
import { int8AsBigInt } from '../../src/storage/postgres/connection.js'
import { createPlantsSql } from '../../src/storage/postgres/create-plants.js'
import { plantJsonSql as postgresJsonSql } from '../../src/storage/postgres/plant-json-sql.js'
import { plantProjections } from '../../src/storage/plant-fields.js'
import { plantJson, plantJsonFor, plantJsonSql } from '../../src/storage/plant-json.js'
import type { Plant as StoredRecord } from '../../src/storage/storage.js'

/** The declaration as it would be with an optional `note` added last. */
const extended: readonly PlantField[] = [...plantFields, { name: 'note', required: false }]

/** Plants with and without the optional fields, in text JSON must escape. */
const samples = [
  { id: 1n, name: 'Monstera', tag: 'indoor', note: 'Big "split" leaves\n\u0001 and \u2028' },
  { id: -9223372036854775808n, name: 'Fern' },
  { id: 9223372036854775807n, name: 'Ivy \\ 🌿', note: 'climbs' },
] as StoredRecord[]

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false

const columns = (fields: readonly PlantField[]) =>
  fields.map(({ name, required }) => `${name} TEXT${required ? ' NOT NULL' : ''}`).join(', ')

describe('the declaration of a plant', () => {
  it('is what the schemas, the type and the list are made of', () => {
    const names = Object.keys(plantFieldSchemas)
    assert.deepEqual(
      plantFields.map((field) => field.name),
      names,
    )
    assert.deepEqual(Object.keys(Plant.properties), names)
    assert.deepEqual(Object.keys(StoredPlant.properties), ['id', ...names])
    assert.deepEqual(
      plantFields.filter((field) => field.required).map((field) => field.name),
      [...Plant.required],
    )
    assert.match(NewPlant.description, new RegExp(`other than id, ${plantFieldWords('and')} are`))
    const typed: Same<keyof PlantFieldValues, keyof typeof plantFieldSchemas> = true
    assert.ok(typed)
  })

  it('holds only strings, each named as a plain SQL column other than id', () => {
    for (const [name, schema] of Object.entries(plantFieldSchemas)) {
      assert.equal(schema.type, 'string', name)
      assert.match(name, /^[a-z][a-z0-9_]*$/)
      assert.notEqual(name, 'id')
    }
  })

  it('names its fields in sentences', () => {
    assert.equal(fieldWords(['name'], 'and'), 'name')
    assert.equal(fieldWords(['name', 'tag'], 'and'), 'name and tag')
    assert.equal(fieldWords(['name', 'tag', 'note'], 'or'), 'name, tag or note')
    assert.match(plantFieldWords('or', extended), / or note$/)
  })
})

describe('a field added to the declaration', () => {
  const p = plantProjections(extended)
  const json = plantJsonFor(extended)

  it('is written by the JSON projection in declaration order, absent when undefined', () => {
    assert.equal(
      json(samples[0]!),
      '{"id":1,"name":"Monstera","tag":"indoor","note":"Big \\"split\\" leaves\\n\\u0001 and \u2028"}',
    )
    assert.equal(json(samples[1]!), '{"id":-9223372036854775808,"name":"Fern"}')
    assert.equal(plantJson(samples[2]!), '{"id":9223372036854775807,"name":"Ivy \\\\ 🌿"}')
  })

  it('is read from a row, bound to an insert, compared and picked from a body', () => {
    const row = { id: 5n, name: 'Fern', tag: null, note: 'soft', created_at: 1 }
    assert.deepEqual(p.toPlant(row), { id: 5n, name: 'Fern', note: 'soft' })
    assert.deepEqual(p.plantValues({ id: 5n, name: 'Fern' }).slice(-1), [null])
    assert.match(p.plantColumns, /^name, tag, .*note$/)
    const stored = { id: 5n, name: 'Fern', note: 'soft' } as StoredRecord
    assert.deepEqual(p.differingFields(stored, { ...stored }), [])
    assert.deepEqual(p.differingFields(stored, { id: 5n, name: 'Fern', note: 'hard' } as StoredRecord), [
      'note',
    ])
    assert.deepEqual(p.differingFields(stored, { id: 5n, name: 'Fern' }), ['note'])
    assert.deepEqual(p.pickPlantFields({ id: 1, name: 'a', note: 'b', colour: 'c' }), {
      name: 'a',
      note: 'b',
    })
  })

  it("is in SQLite's JSON SQL, which answers the projection's text", () => {
    const db = new Database(':memory:')
    try {
      db.exec(`CREATE TABLE plants (id INTEGER PRIMARY KEY, ${columns(extended)})`)
      const insert = db.prepare(
        `INSERT INTO plants (id, ${p.plantColumns}) VALUES (?${', ?'.repeat(extended.length)})`,
      )
      for (const plant of samples) insert.run(plant.id, ...p.plantValues(plant))
      const sql = plantJsonSql((column) => `json_quote(${column})`, undefined, extended)
      assert.match(sql, /',"note":' \|\| json_quote\(note\)/)
      const built = db.prepare(`SELECT ${sql} FROM plants ORDER BY id`).safeIntegers(true).pluck().all()
      assert.deepEqual(built, [...samples].sort((a, b) => (a.id < b.id ? -1 : 1)).map(json))
    } finally {
      db.close()
    }
  })

  const url = process.env.TEST_DATABASE_URL
  it(
    "is in PostgreSQL's create statement and JSON SQL: stored, replayed, refused when it differs",
    { skip: url ? false : 'TEST_DATABASE_URL is not set (scripts/pg-test-server.sh starts one)' },
    async () => {
      const client = new pg.Client({ connectionString: url, types: int8AsBigInt })
      await client.connect()
      try {
        // Temporary tables come first in the search path, so the statements use these.
        await client.query('BEGIN')
        await client.query(`CREATE TEMP TABLE plants (id BIGINT PRIMARY KEY, ${columns(extended)},
          created_at TIMESTAMPTZ NOT NULL)`)
        await client.query('CREATE TEMP TABLE webhook_subscriptions (id TEXT PRIMARY KEY)')
        await client.query(`CREATE TEMP TABLE webhook_deliveries (id TEXT, subscription_id TEXT, plant_id BIGINT,
          payload TEXT, status TEXT, attempts INT, next_attempt_at TIMESTAMPTZ, created_at TIMESTAMPTZ)`)
        await client.query("INSERT INTO webhook_subscriptions VALUES ('sub')")
        const sql = createPlantsSql(extended)
        assert.ok(
          sql.includes(`$${extended.length + 1}::text[]) WITH ORDINALITY AS t(id, ${p.plantColumns}, n)`),
        )
        const create = async (plants: StoredRecord[]) => {
          const values = [
            plants.map((x) => x.id),
            ...extended.map((_, at) => plants.map((x) => p.plantValues(x)[at])),
          ]
          return (await client.query(sql, [...values, new Date()])).rows
        }
        assert.deepEqual(await create(samples), [])
        const stored = await client.query(
          `SELECT ${postgresJsonSql('p', extended)} AS json FROM plants p ORDER BY id`,
        )
        const expected = [...samples].sort((a, b) => (a.id < b.id ? -1 : 1)).map(json)
        assert.deepEqual(
          stored.rows.map((row) => row.json),
          expected,
        )
        const payloads = await client.query('SELECT payload FROM webhook_deliveries ORDER BY plant_id')
        assert.deepEqual(
          payloads.rows.map((row) => row.payload),
          expected,
        )
        const answers = await create([samples[0]!, { ...samples[2]!, note: 'crawls' } as StoredRecord])
        assert.deepEqual(
          answers.map((row) => ({ n: row.n, replayed: row.replayed, note: row.note })),
          [
            { n: 1, replayed: true, note: null },
            { n: 2, replayed: false, note: 'climbs' },
          ],
        )
      } finally {
        await client.query('ROLLBACK').catch(() => {})
        await client.end()
      }
    },
  )
})
