/** `plant-store export` and `import`: exact NDJSON round trips, and import by the rules of POST /plants. */
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { plantJson } from '../../src/storage/plant-json.js'
import type { Plant } from '../../src/storage/storage.js'
import { resetPostgres, runCli, serviceEnv, startService, tempDir, testStores } from '../helpers.js'
import { request } from '../http-client.js'

/** `n` plants with ids spread over int64 (both edges, past 2^53), names and tags of every kind. */
function samplePlants(n: number): Plant[] {
  const plants: Plant[] = [
    { id: 2n ** 63n - 1n, name: 'max' },
    { id: -(2n ** 63n), name: 'min', tag: 'edge' },
    { id: 2n ** 53n + 1n, name: 'past doubles' },
    { id: 0n, name: 'zero "quoted" \\ back\u2028slash', tag: '🌵' },
  ]
  for (let i = 1; plants.length < n; i++) {
    const plant: Plant = { id: BigInt(i) * 7919n, name: `plant ${i} ${'é'.repeat(i % 5)}` }
    if (i % 3 !== 0) plant.tag = `tag${i % 11}`
    plants.push(plant)
  }
  return plants
}

const ndjson = (plants: Plant[]) => plants.map((p) => `${plantJson(p)}\n`).join('')
const byId = (a: Plant, b: Plant) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

for (const store of testStores()) {
  describe(`export and import (${store})`, () => {
    /** A fresh store: a new SQLite file, or the PostgreSQL database emptied. */
    const freshEnv = async () => {
      if (store === 'postgres') await resetPostgres()
      return serviceEnv(store, { KEEP_DATABASE: '1' })
    }

    it('round-trips 20,000 plants exactly: export, import into a fresh store, export again', async () => {
      const folder = tempDir()
      const plants = samplePlants(20_000)
      const input = path.join(folder, 'in.ndjson')
      fs.writeFileSync(input, ndjson(plants))
      let env = await freshEnv()
      const imported = await runCli(['import', input], env)
      assert.equal(imported.code, 0, imported.stderr)
      assert.match(
        imported.stderr,
        /imported: 20,000 created, 0 already present, 0 conflicts, 0 bad lines\n$/,
      )

      const first = path.join(folder, 'first.ndjson')
      const exported = await runCli(['export', first], env)
      assert.equal(exported.code, 0, exported.stderr)
      // Not a terminal: the summary alone, no progress.
      assert.equal(exported.stderr, `exported 20,000 plants to ${first}\n`)
      assert.equal(fs.readFileSync(first, 'utf8'), ndjson([...plants].sort(byId)))

      // The API serves what was imported, ids exact.
      const service = await startService(store, { ...env, KEEP_DATABASE: '1' })
      try {
        const token = await service.token()
        const max = await request('GET', `${service.url}/plants/9223372036854775807`, { token })
        assert.equal(max.text, '{"id":9223372036854775807,"name":"max"}')
      } finally {
        await service.close()
      }

      env = await freshEnv()
      assert.equal((await runCli(['import', first], env)).code, 0)
      const second = await runCli(['export'], env)
      assert.equal(second.code, 0, second.stderr)
      assert.equal(second.stdout, fs.readFileSync(first, 'utf8'), 'stdout export, identical')
      assert.equal(second.stderr, 'exported 20,000 plants\n')

      const again = await runCli(['import', first], env)
      assert.equal(again.code, 0, again.stderr)
      assert.match(again.stderr, /imported: 0 created, 20,000 already present, 0 conflicts, 0 bad lines\n$/)
    })

    it('imports by the rules of POST /plants: the same messages, bad lines and conflicts reported by line', async () => {
      const folder = tempDir()
      const env = { ...(await freshEnv()), BODY_LIMIT: '1KiB' }
      const lines = [
        '{"id":1,"name":"Aloe","tag":"succulent"}',
        '{"id":2,"name":"Basil","extra":{"ignored":true}}',
        '{"id":1,"name":"Aloe","tag":"succulent"}',
        '{"id":1,"name":"Aloe","tag":"herb"}',
        '{"id":3,"name":',
        '{"id":4}',
        `{"id":5,"name":"${'x'.repeat(201)}"}`,
        '{"id":1.5,"name":"Half"}',
        '{"id":9223372036854775808,"name":"Too big"}',
        '{"id":"6","name":"Text id"}',
        '{"id":7,"name":"Proto","__proto__":{"x":1}}',
        '{"id":8,"name":"\\ud800"}',
        '[1,2]',
        `{"id":9,"name":"Long","tag":"t","pad":"${'p'.repeat(1100)}"}`,
        '',
        '{"id":10,"name":"Crlf"}\r',
        '{"id":12,"name":"Fern","tag":""}',
      ]
      const file = path.join(folder, 'mixed.ndjson')
      fs.writeFileSync(
        file,
        Buffer.concat([
          Buffer.from(`${lines.join('\n')}\n`),
          Buffer.from([0x7b, 0x22, 0x69, 0x64, 0x22, 0x3a, 0x31, 0x31, 0x2c, 0xff, 0x7d, 0x0a]),
        ]),
      )
      const result = await runCli(['import', file], env)
      assert.equal(result.code, 1, result.stderr)
      const reported = new Map(
        [...result.stderr.matchAll(/^line (\d+): (.*)$/gm)].map((m) => [Number(m[1]), m[2] as string]),
      )
      assert.deepEqual([...reported.keys()], [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 17, 18])
      assert.equal(reported.get(14), 'body must not be larger than 1024 bytes (BODY_LIMIT)')
      assert.equal(reported.get(18), 'body is not valid UTF-8')
      assert.match(result.stderr, /imported: 3 created, 1 already present, 1 conflict, 12 bad lines\n/)
      assert.match(result.stderr, /plant-store: 13 lines were not imported/)

      const exported = await runCli(['export'], env)
      assert.equal(
        exported.stdout,
        '{"id":1,"name":"Aloe","tag":"succulent"}\n{"id":2,"name":"Basil"}\n{"id":10,"name":"Crlf"}\n',
        'only whole, valid plants were stored',
      )

      // The same bodies sent to POST /plants on a fresh store get the same messages.
      const api = await startService(store, { ...(await freshEnv()), BODY_LIMIT: '1KiB' })
      try {
        const token = await api.token()
        assert.equal((await request('POST', `${api.url}/plants`, { token, body: lines[0] })).status, 200)
        for (const [line, message] of reported) {
          if (line === 14 || line === 18) continue
          const answer = await request('POST', `${api.url}/plants`, { token, body: lines[line - 1] })
          assert.ok(answer.status === 400 || answer.status === 409, `line ${line}: ${answer.status}`)
          assert.equal(message, answer.json.message, `line ${line}`)
        }
      } finally {
        await api.close()
      }
    })

    it('never creates a store to read from, nor from a mistyped file, and never overwrites an export', async () => {
      const folder = tempDir()
      const missing = path.join(folder, 'nowhere', 'plants.db')
      const env = { ...(await freshEnv()), PLANT_STORE_DB: missing }
      if (store === 'sqlite') {
        const read = await runCli(['export', path.join(folder, 'out.ndjson')], env)
        assert.equal(read.code, 1)
        assert.equal(read.stderr, `plant-store: no store at ${missing} (PLANT_STORE_DB); check the path\n`)
        assert.equal(fs.existsSync(path.join(folder, 'out.ndjson')), false)
      }
      const typo = await runCli(['import', path.join(folder, 'typo.ndjson')], env)
      assert.equal(typo.code, 1)
      assert.match(typo.stderr, /cannot read .*typo\.ndjson: ENOENT/)
      assert.equal(fs.existsSync(path.dirname(missing)), false, 'no store was created')

      const target = path.join(folder, 'kept.ndjson')
      fs.writeFileSync(target, 'precious\n')
      const empty = path.join(folder, 'empty.ndjson')
      fs.writeFileSync(empty, '')
      const made = await runCli(['import', empty], env)
      assert.equal(made.code, 0, made.stderr)
      const refused = await runCli(['export', target], env)
      assert.equal(refused.code, 1)
      assert.match(refused.stderr, /already exists; choose a new file or pass --force/)
      assert.equal(fs.readFileSync(target, 'utf8'), 'precious\n')
      assert.equal((await runCli(['export', '--force', target], env)).code, 0)
      assert.equal(fs.readFileSync(target, 'utf8'), '')
      assert.equal((await runCli(['export', 'a', 'b'], env)).code, 2)
      assert.equal((await runCli(['import'], env)).code, 2)
    })
  })
}
