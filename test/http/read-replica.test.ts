/**
 * DATABASE_READ_URL: plant reads from an asynchronous streaming standby (test/pg-pair.ts), never
 * stale after the client's own write, through two `serve` processes, and falling back to the
 * primary when the standby lags, hangs or is gone (docs/postgresql.md#reads-from-a-replica).
 */
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { splitPoolSize } from '../../src/storage/postgres/connection.js'
import {
  createToken,
  freePort,
  runCli,
  type SpawnedService,
  spawnService,
  stopService,
  suiteRunsHere,
  tempDir,
} from '../helpers.js'
import { request } from '../http-client.js'
import { Scrape } from '../metrics-scrape.js'
import { pgAdmin } from '../pg-admin.js'
import { type PgPair, startPgPair } from '../pg-pair.js'

const READS = 'plant_store_plant_reads_total'
const PAIRS = 1_600
const CLIENTS = 8
/** Every this many pairs, the read is a one-plant page starting at the new id instead. */
const PAGE_EVERY = 20

describe('DATABASE_READ_URL at start', () => {
  it('is refused with SQLite, naming both variables, and when malformed, as DATABASE_URL is', async () => {
    const env = { PLANT_STORE_DB: path.join(tempDir(), 'store.db'), LOG_LEVEL: 'silent' }
    const sqlite = await runCli(['serve'], { ...env, DATABASE_READ_URL: 'postgres://replica/db' })
    assert.notEqual(sqlite.code, 0)
    assert.match(sqlite.stderr, /DATABASE_READ_URL needs DATABASE_URL/)
    assert.doesNotMatch(sqlite.stderr, /\n[ \t]+at /, 'no stack trace')
    const primary = 'postgres://primary/db'
    for (const [url, message] of [
      ['mysql://replica/db', /DATABASE_READ_URL must start with postgres:\/\/ or postgresql:\/\//],
      [
        'postgres://h1:5432,h2:70000/db',
        /DATABASE_READ_URL host 2 port must be between 1 and 65535, got 70000/,
      ],
      [
        'postgres://h/db?target_session_attrs=nearest',
        /DATABASE_READ_URL target_session_attrs must be one of/,
      ],
    ] as const) {
      const refused = await runCli(['serve'], { ...env, DATABASE_URL: primary, DATABASE_READ_URL: url })
      assert.notEqual(refused.code, 0, url)
      assert.match(refused.stderr, message)
    }
    assert.throws(
      () => loadConfig({ DATABASE_URL: primary, DATABASE_READ_URL: ' ' }),
      /DATABASE_READ_URL is set but empty/,
    )
    assert.throws(
      () => loadConfig({ DATABASE_URL: primary, DATABASE_READ_URL: primary, DB_POOL_SIZE: '1' }),
      /DB_POOL_SIZE must be at least 2 with DATABASE_READ_URL/,
    )
  })

  it('splits DB_POOL_SIZE: the primary half rounded up, the read pool the rest', () => {
    assert.deepEqual(splitPoolSize(10, false), { primary: 10, read: 0 })
    assert.deepEqual(splitPoolSize(10, true), { primary: 5, read: 5 })
    assert.deepEqual(splitPoolSize(5, true), { primary: 3, read: 2 })
    assert.deepEqual(splitPoolSize(2, true), { primary: 1, read: 1 })
  })
})

const hasPostgres = existsSync('/usr/lib/postgresql')

if (
  suiteRunsHere(
    'reads from a replica',
    hasPostgres,
    'PostgreSQL server binaries',
    'install Debian postgresql; test/pg-pair.ts starts a primary and a standby',
  )
) {
  describe('reads from an asynchronous replica', { timeout: 240_000 }, () => {
    let pair: PgPair
    const services: SpawnedService[] = []
    const silent: net.Server[] = []
    let token: string
    let scraper: string
    let nextId = 1

    const base = { PORT: '0', DB_POOL_SIZE: '8', WEBHOOK_WORKER: 'false', LOAD_SHED_EVENT_LOOP_DELAY_MS: '0' }
    const withReadUrl = (readUrl: string) => ({
      ...base,
      DATABASE_URL: pair.url(pair.primaryPort),
      DATABASE_READ_URL: readUrl,
    })

    async function serve(readUrl: string): Promise<string> {
      const service = await spawnService(withReadUrl(readUrl))
      services.push(service)
      return service.url
    }

    /** The plant-read counter of one instance, by place. */
    async function reads(url: string) {
      const scrape = await Scrape.of(`${url}/metrics`, scraper)
      return {
        replica: scrape.value(READS, { ran: 'replica', reason: 'caught_up' }),
        lagging: scrape.value(READS, { ran: 'primary', reason: 'lagging' }),
        unavailable: scrape.value(READS, { ran: 'primary', reason: 'unavailable' }),
      }
    }

    async function create(url: string): Promise<number> {
      const id = nextId++
      const created = await request('POST', `${url}/plants`, { token, body: `{"id":${id},"name":"p${id}"}` })
      assert.equal(created.status, 200, created.text)
      return id
    }

    before(async () => {
      pair = await startPgPair()
      const env = withReadUrl(pair.url(pair.standbyPort))
      token = await createToken(env, 'reads')
      scraper = await createToken(env, 'scraper', 'metrics:read')
    })

    after(async () => {
      for (const service of services) if (service.child.exitCode === null) await stopService(service)
      for (const server of silent) server.close()
      await pair?.stop()
    })

    it('reads every plant right after its 200, on another instance too, most of them on the replica', async (t) => {
      const standby = pair.url(pair.standbyPort)
      const writer = await serve(standby)
      const reader = await serve(standby)
      const misses: string[] = []
      let done = 0
      await Promise.all(
        Array.from({ length: CLIENTS }, async (_, client) => {
          while (done < PAIRS) {
            const n = done++
            // Half the pairs read from the instance that took the write, half from the other one.
            const id = await create(n % 2 === 0 ? writer : reader)
            const from = (n + client) % 2 === 0 ? reader : writer
            if (n % PAGE_EVERY === 0) {
              const page = await request('GET', `${from}/plants?after=${id - 1}&limit=1`, { token })
              if (page.status !== 200 || page.text !== `[{"id":${id},"name":"p${id}"}]`)
                misses.push(`page after ${id - 1}: ${page.status} ${page.text}`)
            } else {
              const read = await request('GET', `${from}/plants/${id}`, { token })
              if (read.status !== 200) misses.push(`plant ${id}: ${read.status} ${read.text}`)
            }
          }
        }),
      )
      const [a, b] = [await reads(writer), await reads(reader)]
      const total = {
        replica: a.replica + b.replica,
        lagging: a.lagging + b.lagging,
        unavailable: a.unavailable + b.unavailable,
      }
      t.diagnostic(`${PAIRS} pairs: ${misses.length} misses; reads ${JSON.stringify(total)}`)
      assert.deepEqual(misses.slice(0, 10), [], `${misses.length} reads missed their own write`)
      assert.ok(total.replica > 0, 'reads ran on the replica')
      assert.ok(total.replica + total.lagging + total.unavailable >= PAIRS, 'every read is counted')
    })

    it('falls back to the primary while the standby does not replay: the read answers the plant', async () => {
      const url = services[0]!.url
      const standby = pgAdmin(pair.url(pair.standbyPort))
      try {
        await standby`SELECT pg_wal_replay_pause()`
        const before = await reads(url)
        const id = await create(url)
        const read = await request('GET', `${url}/plants/${id}`, { token })
        assert.equal(read.status, 200, read.text)
        assert.equal(read.text, `{"id":${id},"name":"p${id}"}`)
        assert.ok((await reads(url)).lagging > before.lagging, 'counted as a lagging fallback')
      } finally {
        await standby`SELECT pg_wal_replay_resume()`
        await standby.end()
      }
    })

    it('takes the standby of a host list with target_session_attrs=prefer-standby, the primary listed first', async () => {
      const hosts = [pair.primaryPort, pair.standbyPort].map((port) => `127.0.0.1:${port}`).join(',')
      const url = await serve(
        `postgres://postgres@${hosts}/plant_store_test?target_session_attrs=prefer-standby`,
      )
      const id = await create(url)
      const read = await request('GET', `${url}/plants/${id}`, { token })
      assert.equal(read.status, 200, read.text)
      assert.equal((await reads(url)).replica, 1)
      const standby = pgAdmin(pair.url(pair.standbyPort))
      const [row] =
        await standby`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'plant-store'`
      await standby.end()
      assert.ok((row?.n as number) > 0, 'the read pool connected to the standby')
    })

    it('falls back to the primary when the replica refuses connections or never answers', async () => {
      const refused = await serve(`postgres://postgres@127.0.0.1:${await freePort()}/plant_store_test`)
      // A server that takes the connection and says nothing, as a host gone behind a firewall.
      const mute = net.createServer(() => {})
      silent.push(mute)
      await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve))
      const muted = await serve(
        `postgres://postgres@127.0.0.1:${(mute.address() as net.AddressInfo).port}/plant_store_test`,
      )
      for (const url of [refused, muted]) {
        const id = await create(url)
        const read = await request('GET', `${url}/plants/${id}`, { token, timeoutMs: 10_000 })
        assert.equal(read.status, 200, read.text)
        const page = await request('GET', `${url}/plants?after=${id - 1}&limit=1`, {
          token,
          timeoutMs: 10_000,
        })
        assert.equal(page.status, 200, page.text)
        const counted = await reads(url)
        assert.ok(counted.unavailable > 0 && counted.replica === 0, JSON.stringify(counted))
      }
    })

    it('answers from the primary once the standby is stopped', async () => {
      const url = services[0]!.url
      await pair.stopStandby()
      const before = await reads(url)
      for (let i = 0; i < 5; i++) {
        const id = await create(url)
        const read = await request('GET', `${url}/plants/${id}`, { token, timeoutMs: 10_000 })
        assert.equal(read.status, 200, read.text)
      }
      assert.ok((await reads(url)).unavailable > before.unavailable, 'counted as unavailable')
    })
  })
}
