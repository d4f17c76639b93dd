/**
 * The service under `ulimit -n 256` (docs/limits.md): floods of idle connections and slow webhook
 * subscribers must neither crash it nor leave a client without an answer.
 */
import assert from 'node:assert/strict'
import http from 'node:http'
import net from 'node:net'
import { after, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  type SpawnedService,
  serviceEnv,
  spawnService,
  stopService,
  waitFor,
  startServiceProcess,
} from '../helpers.js'
import { rawRequest, request } from '../http-client.js'
import { storeSubscriptions } from './webhook-harness.js'

const FILE_LIMIT = 256

/**
 * How long a flood is held: the memory sampler of load shedding runs every second, and it was a
 * sample taken with no descriptor left that killed the process within one.
 */
const HOLD_MS = 2_500

/** Opens `count` connections to `port` that send nothing; resolves once each is open or refused. */
async function idleConnections(port: number, count: number): Promise<net.Socket[]> {
  return Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<net.Socket>((resolve) => {
          const socket = net.connect(port, '127.0.0.1')
          socket.on('error', () => {})
          socket.once('connect', () => resolve(socket))
          socket.once('close', () => resolve(socket))
        }),
    ),
  )
}

/** Holds a flood for HOLD_MS and asserts that the service is still running at the end. */
async function holdAndCheckAlive(service: SpawnedService): Promise<void> {
  const exited = service.exited.then(() => true)
  const died = await Promise.race([exited, sleep(HOLD_MS, false)])
  assert.equal(died, false, `the service died:\n${service.output().slice(-3000)}`)
}

const healthy = (service: SpawnedService) =>
  waitFor('/healthz to answer 200 again', async () => {
    const answer = await request('GET', `${service.url}/healthz`, { timeoutMs: 2_000 }).catch(() => undefined)
    return answer?.status === 200
  })

describe('descriptors under a low open-file limit', () => {
  const services: SpawnedService[] = []
  const servers: http.Server[] = []
  after(async () => {
    for (const service of services) await stopService(service, 5_000)
    for (const server of servers) {
      server.closeAllConnections()
      server.close()
    }
  })

  it('stays up through 400 idle connections to METRICS_PORT, and answers /healthz after', async () => {
    const env = await serviceEnv('sqlite', { METRICS_PORT: '0' })
    const service = await spawnService(env, [], { fileLimit: FILE_LIMIT })
    services.push(service)
    const metricsUrl = await waitFor(
      'the metrics URL',
      () => /metrics at (http:\S+)/.exec(service.output())?.[1],
    )
    const flood = await idleConnections(Number(new URL(metricsUrl).port), 400)
    await holdAndCheckAlive(service)
    for (const socket of flood) socket.destroy()
    await healthy(service)
  })

  it('stays up with 24 slow webhook subscribers and 200 idle API connections, and answers /healthz after', async () => {
    const held: http.ServerResponse[] = []
    const slow = http.createServer((_request, response) => held.push(response))
    servers.push(slow)
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve))
    const { port } = slow.address() as net.AddressInfo
    const { token, service } = await startServiceProcess('sqlite', {
      env: {
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_POLL_MS: '50',
        WEBHOOK_TIMEOUT_MS: '30000',
        WEBHOOK_LEASE_MS: '60000',
      },
      name: 'budget',
      prepare: (env) =>
        storeSubscriptions(
          env,
          Array.from({ length: 24 }, (_, i) => `http://127.0.0.1:${port}/slow${i}`),
        ),
      fileLimit: FILE_LIMIT,
    })
    services.push(service)
    for (let id = 1; id <= 3; id++) {
      const created = await request('POST', `${service.url}/plants`, { token, body: { id, name: `P${id}` } })
      assert.equal(created.status, 200)
    }
    await waitFor('64 sends held by the slow subscribers', () => held.length >= 64, 10_000)
    const flood = await idleConnections(Number(new URL(service.url).port), 200)
    await holdAndCheckAlive(service)
    for (const socket of flood) socket.destroy()
    await healthy(service)
  })

  // Under 256 descriptors the budget leaves about 60 connections: 500 at once cannot all be held.
  // At 1024 (a common default) the defaults hold them, and a refusal under a lower cap is answered.
  for (const extra of [{}, { MAX_CONNECTIONS_PER_ADDRESS: '256' }] as Record<string, string>[]) {
    it(`answers every one of 500 concurrent creates from one address under ulimit -n 1024 ${JSON.stringify(extra)}`, async (t) => {
      const { token, service } = await startServiceProcess('sqlite', {
        env: extra,
        name: 'budget',
        fileLimit: 1024,
      })
      services.push(service)
      const outcomes = await Promise.allSettled(
        Array.from({ length: 500 }, (_, i) =>
          rawRequest(
            `${service.url}/plants`,
            'POST',
            { authorization: `Bearer ${token}`, 'content-type': 'application/json', connection: 'close' },
            JSON.stringify({ id: i + 1, name: `Concurrent ${i + 1}` }),
          ),
        ),
      )
      const answers = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []))
      const failures = outcomes.flatMap((outcome) =>
        outcome.status === 'rejected' ? [(outcome.reason as NodeJS.ErrnoException).code ?? 'error'] : [],
      )
      const refused = answers.filter((answer) => answer.status !== 200)
      t.diagnostic(`${answers.length} answers (${refused.length} refusals), ${failures.length} without one`)
      assert.deepEqual(
        failures,
        [],
        `${answers.length} answers (${refused.length} refusals), ${failures.length} without one`,
      )
      for (const answer of refused) {
        assert.equal(answer.status, 503, answer.text)
        assert.equal(answer.headers['retry-after'], '1')
        assert.equal(answer.headers.connection, 'close')
        assert.equal(JSON.parse(answer.text).code, 'TOO_MANY_CONNECTIONS')
      }
      // The defaults let one client hold 500 connections; the old cap of 256 refuses some, in words.
      if (extra.MAX_CONNECTIONS_PER_ADDRESS === undefined) assert.equal(refused.length, 0)
      await healthy(service)
    })
  }
})
