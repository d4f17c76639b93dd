/**
 * Checkpoints copy the WAL into the database file; one whose write or sync of that file fails is
 * a failed sync (docs/durability.md): the store takes no more writes, /readyz says why, one fatal
 * line is logged. An LD_PRELOAD shim (test/fixtures/disk-fault.c) fails the database file alone,
 * never the WAL, so every commit itself succeeds; the service is the real one, on a real file.
 */
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { describe, it } from 'node:test'
import { spawnService, stopService, startServiceProcess } from '../helpers.js'
import { request } from '../http-client.js'
import { diskFaultEnv } from '../shim.js'

/** SQLite's checkpoint threshold, 1000 pages of 4 KiB as WAL frames, and one full batch above it. */
const WAL_BOUND = 32 + (1000 + 256) * (4096 + 24)
/** Creates each round sends at once; long names and spread tags fill pages quickly. */
const ROUND = 50
const MAX_ROUNDS = 400

/** A loaded machine's event-loop lag would shed requests with 503 OVERLOADED: not what is tested here. */
const NO_SHEDDING = { LOAD_SHED_EVENT_LOOP_DELAY_MS: '0' }

const plant = (id: number) => ({ id, name: `${'n'.repeat(180)} ${id}`, tag: `tag-${(id * 7919) % 997}` })

describe('checkpoints into the database file (sqlite)', () => {
  for (const fault of ['db-sync', 'db-sync-once', 'db-write-eio', 'db-write-enospc'] as const) {
    it(`stops taking writes at the first checkpoint that fails (${fault})`, async () => {
      const { env, token, service } = await startServiceProcess('sqlite', {
        env: NO_SHEDDING,
        name: 'checkpoint',
        serveEnv: (env) => diskFaultEnv(env, `${env.PLANT_STORE_DB}.disk-fault`),
      })
      const marker = `${env.PLANT_STORE_DB}.disk-fault`
      const create = (url: string, id: number) => request('POST', `${url}/plants`, { token, body: plant(id) })
      const acknowledged: number[] = []
      try {
        fs.writeFileSync(marker, fault)
        let refused: Awaited<ReturnType<typeof create>> | undefined
        for (let round = 0; round < MAX_ROUNDS && !refused; round++) {
          const ids = Array.from({ length: ROUND }, (_, i) => round * ROUND + i + 1)
          const answers = await Promise.all(ids.map((id) => create(service.url, id)))
          for (const [i, answer] of answers.entries()) {
            if (answer.status === 200) acknowledged.push(ids[i] as number)
            else refused ??= answer
          }
        }
        const wal = fs.statSync(`${env.PLANT_STORE_DB}-wal`).size
        assert.ok(refused, `${acknowledged.length} creates acknowledged, none refused, WAL ${wal} bytes`)
        assert.equal(refused.status, 503, refused.text)
        assert.ok(wal <= WAL_BOUND, `the WAL grew to ${wal} bytes`)

        // Refused for good, though the disk would now take the writes.
        fs.rmSync(marker, { force: true })
        const later = await create(service.url, 1_000_000)
        assert.equal(later.status, 503, later.text)
        assert.deepEqual(Object.keys(later.json).sort(), ['code', 'error', 'message'])
        assert.equal(later.json.code, 'STORE_UNAVAILABLE')
        assert.equal(later.headers.get('retry-after'), '5')
        const ready = await request('GET', `${service.url}/readyz`)
        assert.equal(ready.status, 503)
        assert.match(
          ready.json.message,
          /stopped taking writes \(a checkpoint into its database file failed\)/,
        )
        assert.equal(ready.headers.get('retry-after'), '5')
        const first = acknowledged[0] as number
        assert.equal(
          (await request('GET', `${service.url}/plants/${first}`, { token })).status,
          200,
          'reads go on',
        )
        const fatal = service
          .output()
          .split('\n')
          .filter((line) => line.includes('"level":"fatal"'))
        assert.equal(fatal.length, 1, service.output())
        assert.match(fatal[0] as string, /the store takes no more writes: restart the service/)
        assert.match(fatal[0] as string, /checkpoint/)
      } finally {
        fs.rmSync(marker, { force: true })
        await stopService(service)
      }

      const restarted = await spawnService(env)
      try {
        for (const id of acknowledged.filter((_, i) => i % 97 === 0 || i === acknowledged.length - 1)) {
          const read = await request('GET', `${restarted.url}/plants/${id}`, { token })
          assert.equal(read.status, 200, `plant ${id}`)
          assert.deepEqual(read.json, plant(id))
        }
        assert.equal((await create(restarted.url, 2_000_000)).status, 200)
      } finally {
        await stopService(restarted)
      }
    })
  }

  it('keeps the WAL bounded under steady writes, and reports its size in /readyz and the metrics', async () => {
    const { token, service } = await startServiceProcess('sqlite', {
      env: NO_SHEDDING,
      name: 'checkpoint',
      scopes: 'plants:read,plants:write,metrics:read',
    })
    try {
      const sizes: number[] = []
      for (let round = 0; round < 120; round++) {
        const ids = Array.from({ length: ROUND }, (_, i) => round * ROUND + i + 1)
        const answers = await Promise.all(
          ids.map((id) => request('POST', `${service.url}/plants`, { token, body: plant(id) })),
        )
        for (const answer of answers) assert.equal(answer.status, 200, answer.text)
        const ready = await request('GET', `${service.url}/readyz`)
        assert.equal(ready.status, 200, ready.text)
        sizes.push(ready.json.details.walBytes)
      }
      const largest = Math.max(...sizes)
      assert.ok(largest <= WAL_BOUND, `the WAL reached ${largest} bytes`)
      const shrank = sizes.some((size, i) => i > 0 && size < (sizes[i - 1] as number))
      assert.ok(shrank, `no checkpoint started the WAL over: ${sizes.join(', ')}`)
      const metrics = await request('GET', `${service.url}/metrics`, { token })
      const gauge = /^plant_store_sqlite_wal_bytes (\d+)$/m.exec(metrics.text)
      assert.ok(gauge, metrics.text)
      assert.ok(Number(gauge[1]) <= WAL_BOUND, `the metric says ${gauge[1]} bytes`)
    } finally {
      await stopService(service)
    }
  })
})
