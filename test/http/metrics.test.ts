/** GET /metrics as Prometheus scrapes it, parsed by a real text-format parser. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  createToken,
  serviceEnv,
  spawnService,
  startService,
  stopService,
  testStores,
  waitFor,
} from '../helpers.js'
import { request } from '../http-client.js'
import { Scrape } from '../metrics-scrape.js'
import { setupWebhooks } from './webhook-harness.js'

const REQUESTS = 'plant_store_http_requests_total'
const DURATION = 'plant_store_http_request_duration_seconds'
const AUTH = 'plant_store_auth_failures_total'
const ATTEMPTS = 'plant_store_webhook_attempts_total'

for (const store of testStores()) {
  describe(`metrics (${store})`, () => {
    it('count requests by route pattern, authentication failures, group commits and webhook attempts', async (t) => {
      // Polled below: unlimited scrapes (the limit has a test of its own). The held send lasts
      // longer than the 5 s the backlog gauges are cached, so that a scrape sees it pending.
      const ctx = await setupWebhooks(store, t, {
        METRICS_RATE_LIMIT: '0',
        WEBHOOK_TIMEOUT_MS: '9000',
        WEBHOOK_LEASE_MS: '18000',
      })
      const scraper = await createToken(ctx.env, 'prometheus', 'metrics:read')
      const receiver = await ctx.receiver()
      // The first send is held until it times out: pending while held, then retried and delivered.
      receiver.answer = (n) => (n === 1 ? 'hold' : 200)
      await ctx.subscribe(receiver)
      const service = await ctx.start()
      const metrics = `${service.url}/metrics`
      const scrape = () => Scrape.of(metrics, scraper)
      const before = await scrape()

      const created = await ctx.post('{"id":4242,"name":"Counted"}')
      assert.equal(created.status, 200, created.text)
      assert.equal((await request('GET', `${service.url}/plants/4242`, { token: ctx.token })).status, 200)
      assert.equal((await request('GET', `${service.url}/plants/4343`, { token: ctx.token })).status, 404)
      assert.equal((await request('GET', `${service.url}/plants`)).status, 401)
      assert.equal((await request('GET', `${service.url}/plants`, { token: 'not-a-token' })).status, 401)
      await waitFor('the first send', () => receiver.received.length === 1)
      // The backlog gauges are cached for 5 s: the scrape before the create may still be served.
      const held = await waitFor('the held delivery counted', async () => {
        const next = await scrape()
        return next.value('plant_store_webhook_deliveries_pending') === 1 ? next : undefined
      })
      assert.ok(held.value('plant_store_webhook_oldest_pending_age_seconds') > 0)

      await waitFor('the retry delivered', () => receiver.received.some((r) => r.answered === 200))
      const after = await waitFor('the delivery recorded', async () => {
        const next = await scrape()
        const recorded = next.value('plant_store_webhook_deliveries_pending') === 0
        return recorded && next.value(ATTEMPTS, { outcome: 'delivered' }) === 1 ? next : undefined
      })

      const moved = (name: string, labels: Record<string, string>) =>
        after.value(name, labels) - before.value(name, labels)
      assert.equal(moved(REQUESTS, { route: '/plants', method: 'POST', status: '200' }), 1)
      assert.equal(moved(REQUESTS, { route: '/plants/:id', method: 'GET', status: '200' }), 1)
      assert.equal(moved(REQUESTS, { route: '/plants/:id', method: 'GET', status: '404' }), 1)
      assert.equal(moved(REQUESTS, { route: '/plants', method: 'GET', status: '401' }), 2)
      // A scrape hands the counter only what it has not had yet: the next one counts nothing twice.
      const again = await scrape()
      const created200 = { route: '/plants', method: 'POST', status: '200' }
      assert.equal(again.value(REQUESTS, created200), after.value(REQUESTS, created200))
      assert.equal(after.type(DURATION), 'HISTOGRAM')
      // The pattern, never the URL: no label carries an id.
      const routes = after.families.get(REQUESTS)?.metrics.map((sample) => sample.labels?.route) ?? []
      assert.ok(!routes.some((route) => /\d/.test(route ?? '')), routes.join(', '))

      assert.equal(moved(AUTH, { reason: 'missing' }), 1)
      assert.equal(moved(AUTH, { reason: 'unknown' }), 1)
      assert.equal(moved(ATTEMPTS, { outcome: 'retry' }), 1)
      assert.equal(after.value('plant_store_webhook_deliveries_pending'), 0)
      assert.equal(after.value('plant_store_webhook_oldest_pending_age_seconds'), 0)
      const commits = (scrape: Scrape) => scrape.count('plant_store_group_commit_batch_size')
      assert.ok(commits(after) > commits(before), 'the create was group-committed')
      assert.ok(after.count('plant_store_group_commit_duration_seconds') > 0)
      // The scrape itself is the one request in flight.
      assert.equal(after.value('plant_store_http_requests_in_flight'), 1)
      for (const name of [
        'process_cpu_user_seconds_total',
        'nodejs_eventloop_lag_seconds',
        'nodejs_heap_size_used_bytes',
      ])
        assert.ok(after.has(name), `Node's default metric ${name}`)
      for (const name of [
        'plant_store_rate_limited_total',
        'plant_store_load_shed_total',
        'plant_store_store_errors_total',
      ])
        assert.ok(after.has(name), `${name} is declared`)
    })
  })
}

for (const store of testStores()) {
  describe(`the webhook backlog gauges (${store})`, () => {
    it('are read from the store once per 5 s: a scrape storm is served the cached reading, then a fresh one', async (t) => {
      // No worker, so the deliveries stay pending; unlimited scrapes, as the refresh is polled.
      const service = await startService(store, { WEBHOOK_WORKER: 'false', METRICS_RATE_LIMIT: '0' })
      t.after(() => service.close())
      await service.storage.addSubscription({
        id: 'sub-backlog',
        url: 'https://receiver.example/hook',
        secret: 'whsec_c2VjcmV0',
        createdAt: new Date(),
      })
      const token = await service.token()
      const create = async (id: number) => {
        const body = { id, name: `pending ${id}` }
        const created = await request('POST', `${service.url}/plants`, { token, body })
        assert.equal(created.status, 200, created.text)
      }
      const pending = async () =>
        (await Scrape.of(`${service.url}/metrics`, token)).value('plant_store_webhook_deliveries_pending')

      await create(1)
      assert.equal(await pending(), 1)
      await create(2)
      assert.equal((await service.storage.webhookBacklog()).pending, 2)
      // Within the window every scrape gets the first reading, however many there are.
      for (let i = 0; i < 20; i++) assert.equal(await pending(), 1, `scrape ${i} in the window`)
      await waitFor('a fresh reading once the window has passed', async () => (await pending()) === 2)
    })
  })
}

describe('where metrics are served', () => {
  it('METRICS=false serves none', async () => {
    const service = await startService('sqlite', { METRICS: 'false' })
    try {
      // Plain fetch, not recorded for the OpenAPI coverage step: this deployment has no such
      // operation, where the document's default one has.
      const response = await fetch(`${service.url}/metrics`)
      assert.equal(response.status, 404)
      assert.deepEqual(await response.json(), {
        error: 404,
        message: 'no route for GET /metrics',
        code: 'ROUTE_NOT_FOUND',
      })
    } finally {
      await service.close()
    }
  })

  for (const workers of ['1', '2']) {
    it(`METRICS_PORT serves them apart from the API (workers: ${workers}), summed over the workers`, async () => {
      const env = await serviceEnv('sqlite', { METRICS_PORT: '0' })
      const service = await spawnService(env, ['--workers', workers])
      try {
        // The primary asks every worker; one still starting would make the scrape wait for it.
        if (workers === '2') await waitFor('every worker', () => service.output().includes('cluster ready'))
        const url = await waitFor(
          'the metrics address',
          () => /"url":"(http:\/\/127\.0\.0\.1:\d+\/metrics)"/.exec(service.output())?.[1],
        )
        assert.equal((await fetch(`${service.url}/metrics`)).status, 404)
        const before = await Scrape.of(url)
        const health = { route: '/healthz', method: 'GET', status: '200' }
        // New connections, so that with two workers both take some.
        for (let i = 0; i < 20; i++) {
          const response = await request('GET', `${service.url}/healthz`, {
            headers: { connection: 'close' },
          })
          assert.equal(response.status, 200)
        }
        const after = await Scrape.of(url)
        assert.equal(after.value(REQUESTS, health) - before.value(REQUESTS, health), 20)
        assert.ok(after.has('process_cpu_user_seconds_total'))
        assert.equal((await request('POST', url)).status, 405)
      } finally {
        assert.equal(await stopService(service), 0)
      }
    })
  }
})
