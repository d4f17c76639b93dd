import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  suiteRunsHere,
  createToken,
  freePort,
  postgresHint,
  runCli,
  type SpawnedService,
  spawnService,
  stopService,
} from '../helpers.js'
import { type ApiResponse, request } from '../http-client.js'
import { pgAdmin } from '../pg-admin.js'
import { MovableProxy, type PgPair, startPgPair } from '../pg-pair.js'

/** Statuses of a create load, and what went wrong beyond a 503 with Retry-After. */
interface Tally {
  statuses: Map<number, number>
  broken: string[]
  acked: bigint[]
}

/** `clients` loops of creates with fresh ids until `stop()`; every answer is recorded. */
function createLoad(base: string, token: string, clients: number, firstId: bigint) {
  const tally: Tally = { statuses: new Map(), broken: [], acked: [] }
  let next = firstId
  let stopped = false
  const loops = Array.from({ length: clients }, async () => {
    while (!stopped) {
      const id = next++
      let response: ApiResponse
      try {
        response = await request('POST', `${base}/plants`, {
          token,
          body: `{"id":${id},"name":"load"}`,
          timeoutMs: 15_000,
        })
      } catch (error) {
        tally.broken.push(`id ${id}: ${String(error)}`)
        continue
      }
      tally.statuses.set(response.status, (tally.statuses.get(response.status) ?? 0) + 1)
      if (response.status === 200) tally.acked.push(id)
      else if (response.status !== 503 || !response.headers.get('retry-after'))
        tally.broken.push(`id ${id}: ${response.status} ${response.text}`)
    }
  })
  return {
    tally,
    stop: async () => {
      stopped = true
      await Promise.all(loops)
      return tally
    },
  }
}

if (
  suiteRunsHere(
    'multi-host DATABASE_URL and failover',
    !!process.env.TEST_DATABASE_URL,
    'TEST_DATABASE_URL',
    postgresHint,
  )
) {
  describe('multi-host DATABASE_URL and failover', () => {
    let pair: PgPair
    let deadPort: number
    const services: SpawnedService[] = []
    const proxies: MovableProxy[] = []
    const quiet = { PORT: '0', LOG_LEVEL: 'silent', DB_POOL_SIZE: '4', WEBHOOK_WORKER: 'false' }

    /** A service whose DATABASE_URL is a proxy to the primary, as behind a virtual IP. */
    async function behindProxy(name: string) {
      const proxy = await MovableProxy.start(pair.primaryPort)
      proxies.push(proxy)
      const env = { ...quiet, DATABASE_URL: `postgres://postgres@127.0.0.1:${proxy.port}/plant_store_test` }
      const token = await createToken(env, name)
      const service = await spawnService(env)
      services.push(service)
      return { proxy, token, service }
    }

    before(async () => {
      pair = await startPgPair()
      deadPort = await freePort()
    })

    after(async () => {
      for (const service of services) if (service.child.exitCode === null) await stopService(service)
      for (const proxy of proxies) await proxy.close()
      await pair?.stop()
    })

    it('refuses a standby named alone with target_session_attrs=read-write, naming the setting', async () => {
      const url = `${pair.url(pair.standbyPort)}?target_session_attrs=read-write`
      const result = await runCli(['serve'], { ...quiet, DATABASE_URL: url, DB_STATEMENT_TIMEOUT_MS: '1000' })
      assert.equal(result.code, 1, result.stderr)
      assert.match(result.stderr, /DATABASE_URL/)
      assert.match(
        result.stderr,
        /is a standby, not what DATABASE_URL target_session_attrs=read-write asks for/,
      )
      assert.doesNotMatch(result.stderr, /\n[ \t]+at /, 'no stack trace')
    })

    it('serves from the one fit host of a list whose first host is down and second a standby', async () => {
      const hosts = [deadPort, pair.standbyPort, pair.primaryPort].map((port) => `127.0.0.1:${port}`)
      const url = `postgres://postgres@${hosts.join(',')}/plant_store_test?target_session_attrs=read-write`
      const env = { ...quiet, DATABASE_URL: url }
      const token = await createToken(env, 'multi-host')
      const service = await spawnService(env)
      services.push(service)
      const created = await request('POST', `${service.url}/plants`, {
        token,
        body: '{"id":1,"name":"Listed"}',
      })
      assert.equal(created.status, 200, created.text)
      assert.equal(
        (await request('GET', `${service.url}/plants/1`, { token })).text,
        '{"id":1,"name":"Listed"}',
      )
      assert.equal((await request('GET', `${service.url}/readyz`)).status, 200)
      await stopService(service)
    })

    it('waits out an address that moves from a standby to the primary: the create is answered 200', async () => {
      const { proxy, token, service } = await behindProxy('moving')
      const base = service.url
      assert.equal(
        (await request('POST', `${base}/plants`, { token, body: '{"id":2,"name":"a"}' })).status,
        200,
      )
      // The address now leads to a standby, and the service's sessions on the primary end: each
      // new connection lands on the standby, and each write there fails with 25006.
      proxy.target = pair.standbyPort
      const admin = pgAdmin(pair.url(pair.primaryPort))
      await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'plant-store'`
      await admin.end()
      const pending = request('POST', `${base}/plants`, {
        token,
        body: '{"id":3,"name":"b"}',
        timeoutMs: 15_000,
      })
      await sleep(1500)
      proxy.target = pair.primaryPort
      const moved = await pending
      assert.equal(moved.status, 200, `the create waited for the primary: ${moved.text}`)
      await stopService(service)
    })

    it('rides through a failover under create load: promote the standby, move the address', async (t) => {
      const { proxy, token, service } = await behindProxy('failover')
      const load = createLoad(service.url, token, 4, 1_000_000n)
      await sleep(1000)
      const failedOver = performance.now()
      await pair.stopPrimary('fast')
      await pair.promote()
      proxy.target = pair.standbyPort
      t.diagnostic(`stop + promote + move took ${Math.round(performance.now() - failedOver)} ms`)
      await sleep(3000)
      const tally = await load.stop()
      t.diagnostic(`answers: ${JSON.stringify(Object.fromEntries(tally.statuses))}`)
      assert.deepEqual(tally.broken, [], 'only 200s and 503s with Retry-After, no reset')
      const after = await request('POST', `${service.url}/plants`, { token, body: '{"id":4,"name":"c"}' })
      assert.equal(after.status, 200, `recovered without a restart: ${after.text}`)
      assert.equal(tally.statuses.get(503) ?? 0, 0, 'a failover shorter than the deadline costs no 503')
      const admin = pgAdmin(pair.url(pair.standbyPort))
      const [row] = await admin`SELECT count(*)::int AS n FROM plants WHERE id = ANY(${tally.acked})`
      await admin.end()
      assert.equal(row?.n, tally.acked.length, 'every acknowledged create is on the new primary')
      await stopService(service)
    })
  })
}
