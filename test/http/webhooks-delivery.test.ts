/** Webhook delivery as a subscriber sees it: the signed request, one event per create, retries and the attempt budget. */
import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort, runCli, testStores, waitFor } from '../helpers.js'
import { request } from '../http-client.js'
import { setupWebhooks } from './webhook-harness.js'

for (const store of testStores()) {
  describe(`webhooks: delivery (${store})`, () => {
    const setup = (t: TestContext, extra?: Record<string, string>) => setupWebhooks(store, t, extra)

    it('POSTs the exact NewPlant JSON, signed per Standard Webhooks, with the delivery id as webhook-id', async (t) => {
      const ctx = await setup(t)
      const receiver = await ctx.receiver()
      // The secret `webhooks add` prints is the one the service signs with.
      receiver.secret = await ctx.addSubscriber(receiver.url)
      await ctx.start()
      const body = '{"id":9223372036854775807,"name":"Exact","tag":"int64"}'
      const created = await ctx.post(body)
      assert.equal(created.status, 200, created.text)

      await waitFor('the webhook', () => receiver.received.length === 1)
      const [got] = receiver.received
      assert.ok(got)
      assert.equal(got.method, 'POST')
      assert.equal(got.body, '{"id":9223372036854775807,"name":"Exact","tag":"int64"}')
      assert.equal(got.verifyError, null)
      assert.match(got.contentType, /^application\/json/)
      assert.match(got.signature, /^v1,[A-Za-z0-9+/]+=*$/)
      assert.ok(Math.abs(Number(got.timestamp) - Date.now() / 1000) < 60, 'timestamp is unix seconds, now')

      const [row] = await waitFor('delivered status', async () => {
        const rows = await ctx.stored()
        return rows[0]?.status === 'delivered' ? rows : undefined
      })
      assert.ok(row)
      assert.equal(row.id, got.webhookId)
      assert.equal(row.plantId, '9223372036854775807')
      assert.equal(row.attempts, 1)
      assert.equal(row.lastStatus, 200)
      assert.equal(row.lastError, null)
      assert.equal(row.nextAttempt, null)
    })

    it('sends one event per created plant to every subscriber', async (t) => {
      const ctx = await setup(t)
      const first = await ctx.receiver()
      const second = await ctx.receiver()
      await ctx.subscribe(first)
      await ctx.subscribe(second)
      await ctx.start()
      for (const id of [1, 2, 3]) {
        const created = await ctx.post(`{"id":${id},"name":"Plant ${id}"}`)
        assert.equal(created.status, 200, created.text)
      }
      await waitFor(
        'three events at each subscriber',
        () => first.received.length >= 3 && second.received.length >= 3,
      )
      await waitFor('every delivery recorded', async () =>
        (await ctx.stored()).every((row) => row.status === 'delivered'),
      )
      for (const receiver of [first, second]) {
        assert.equal(receiver.received.length, 3)
        assert.equal(new Set(receiver.ids).size, 3)
        assert.deepEqual(receiver.received.map((r) => r.body).sort(), [
          '{"id":1,"name":"Plant 1"}',
          '{"id":2,"name":"Plant 2"}',
          '{"id":3,"name":"Plant 3"}',
        ])
        assert.ok(receiver.received.every((r) => r.verifyError === null))
      }
      // One event per subscriber: each has its own webhook-id.
      assert.equal(new Set([...first.ids, ...second.ids]).size, 6)
      assert.equal((await ctx.deliveries()).length, 6)
    })

    it('sends nothing for an idempotent replay or a conflict', async (t) => {
      const ctx = await setup(t)
      const receiver = await ctx.receiver()
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":7,"name":"Once"}')).status, 200)
      await waitFor('the first event', () => receiver.received.length === 1)
      assert.equal((await ctx.post('{"id":7,"name":"Once"}')).status, 200)
      assert.equal((await ctx.post('{"id":7,"name":"Other"}')).status, 409)
      // A later create is delivered; by then an event for the replay would be in the outbox too.
      assert.equal((await ctx.post('{"id":8,"name":"Sentinel"}')).status, 200)
      await waitFor('the sentinel event', () => receiver.received.some((r) => r.body.includes('Sentinel')))
      const rows = await ctx.deliveries()
      assert.deepEqual(rows.map((row) => row.plantId).sort(), ['7', '8'])
      // A stray delivery would arrive within a poll interval: an absence can only be waited out.
      await sleep(300)
      assert.equal(receiver.received.length, 2)
      assert.deepEqual(receiver.received.map((r) => r.body).sort(), [
        '{"id":7,"name":"Once"}',
        '{"id":8,"name":"Sentinel"}',
      ])
    })

    it('retries after 500 with the same webhook-id, re-signed, until a 2xx', async (t) => {
      const ctx = await setup(t)
      const receiver = await ctx.receiver()
      receiver.answer = (n) => (n <= 2 ? 500 : 204)
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":10,"name":"Retry"}')).status, 200)
      const [row] = await waitFor('delivered after retries', async () => {
        const rows = await ctx.stored()
        return rows[0]?.status === 'delivered' ? rows : undefined
      })
      assert.ok(row)
      assert.equal(receiver.received.length, 3)
      assert.deepEqual(
        receiver.received.map((r) => r.answered),
        [500, 500, 204],
      )
      assert.deepEqual(new Set(receiver.ids), new Set([row.id]))
      assert.ok(
        receiver.received.every((r) => r.verifyError === null && r.body === '{"id":10,"name":"Retry"}'),
      )
      assert.equal(row.attempts, 3)
      assert.equal(row.lastStatus, 204)
    })

    it('still announces a plant deleted before its event was delivered: the creation happened', async (t) => {
      const ctx = await setup(t, { WEBHOOK_MAX_ATTEMPTS: '100' })
      const receiver = await ctx.receiver()
      let accept = false
      receiver.answer = () => (accept ? 200 : 500)
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":11,"name":"Gone soon"}')).status, 200)
      await waitFor('a first attempt refused', async () => receiver.received.length > 0 || undefined)
      const url = `${ctx.service.url}/plants/11`
      assert.equal((await request('DELETE', url, { token: ctx.token })).status, 204)
      accept = true
      const [row] = await waitFor('delivered after the delete', async () => {
        const rows = await ctx.stored()
        return rows[0]?.status === 'delivered' ? rows : undefined
      })
      assert.ok(row)
      assert.equal(receiver.received.at(-1)?.body, '{"id":11,"name":"Gone soon"}')
      assert.equal(receiver.received.at(-1)?.verifyError, null)
      assert.deepEqual(new Set(receiver.ids), new Set([row.id]))
      assert.equal((await request('GET', url, { token: ctx.token })).status, 404)
    })

    it('retries while the receiver is down and delivers once it is up', async (t) => {
      const ctx = await setup(t, { WEBHOOK_MAX_ATTEMPTS: '100' })
      const port = await freePort()
      const url = `http://127.0.0.1:${port}/hooks/plants`
      const secret = await ctx.addSubscriber(url)
      await ctx.start()
      assert.equal((await ctx.post('{"id":11,"name":"Down"}')).status, 200)
      const [failing] = await waitFor('a refused attempt', async () => {
        const rows = await ctx.stored()
        return (rows[0]?.attempts ?? 0) >= 2 ? rows : undefined
      })
      assert.ok(failing)
      assert.equal(failing.status, 'pending')
      assert.equal(failing.lastStatus, null)
      assert.match(failing.lastError ?? '', /ECONNREFUSED/)
      assert.ok(failing.nextAttempt)

      const receiver = await ctx.receiver(port)
      receiver.secret = secret
      await waitFor('delivery once up', () => receiver.acknowledged().size === 1)
      const [got] = receiver.received
      assert.equal(got?.webhookId, failing.id)
      assert.equal(got?.verifyError, null)
      await waitFor('delivered status', async () => (await ctx.stored())[0]?.status === 'delivered')
    })

    it('marks a delivery failed after the attempt budget and lists it with --failed', async (t) => {
      const ctx = await setup(t)
      const receiver = await ctx.receiver()
      receiver.answer = () => 500
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":12,"name":"Doomed"}')).status, 200)
      assert.equal((await ctx.post('{"id":13,"name":"Also doomed"}')).status, 200)
      const failed = await ctx.failed(2)
      for (const row of failed) {
        assert.equal(row.status, 'failed')
        assert.equal(row.attempts, 3)
        assert.equal(row.lastStatus, 500)
        assert.equal(row.lastError, 'HTTP 500')
        assert.equal(row.nextAttempt, null)
      }
      assert.deepEqual(failed.map((row) => row.plantId).sort(), ['12', '13'])
      // A fourth attempt would come within a poll interval: an absence can only be waited out.
      await sleep(300)
      assert.equal(receiver.received.length, 6, 'exactly the budget: 3 attempts each')
      for (const row of failed) assert.equal(receiver.ids.filter((id) => id === row.id).length, 3)

      const text = await runCli(['webhooks', 'deliveries', '--failed'], ctx.env)
      assert.equal(text.code, 0, text.stderr)
      assert.match(text.stdout, /HTTP 500/)
      for (const row of failed) assert.ok(text.stdout.includes(row.id))
    })

    it('lists each attempt with its HTTP status and error, newest first', async (t) => {
      // A timeout long enough that the answered sends arrive before it on a loaded machine (at 200 ms,
      // with the file's tests side by side, the first send timed out before its 500 arrived).
      const ctx = await setup(t, { WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_LEASE_MS: '2000' })
      const receiver = await ctx.receiver()
      receiver.answer = (n) => (n === 1 ? 500 : n === 2 ? 'hold' : 503)
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":15,"name":"Fickle receiver"}')).status, 200)
      const [row] = await ctx.failed(1)
      assert.ok(row)
      assert.deepEqual(
        row.recentAttempts.map(({ attempt, httpStatus, error }) => ({ attempt, httpStatus, error })),
        [
          { attempt: 3, httpStatus: 503, error: 'HTTP 503' },
          { attempt: 2, httpStatus: null, error: 'timeout after 1000 ms' },
          { attempt: 1, httpStatus: 500, error: 'HTTP 500' },
        ],
      )
      const times = row.recentAttempts.map((a) => Date.parse(a.at))
      assert.ok(
        times.every((time, i) => i === 0 || time <= (times[i - 1] ?? 0)),
        times.join(' '),
      )
      assert.equal(row.recentAttempts[0]?.at, row.lastAttempt)

      assert.deepEqual(
        (await ctx.deliveries('--attempts', '1'))[0]?.recentAttempts.map((a) => a.attempt),
        [3],
      )
      assert.deepEqual((await ctx.deliveries('--attempts', '0'))[0]?.recentAttempts, [])
      for (const bad of ['-1', 'x', '1001', '1.5']) {
        const result = await runCli(['webhooks', 'deliveries', `--attempts=${bad}`], ctx.env)
        assert.equal(result.code, 2, `--attempts ${bad}`)
        assert.match(result.stderr, /--attempts must be a whole number from 0 to 1000/)
      }

      const text = await runCli(['webhooks', 'deliveries', '--failed'], ctx.env)
      assert.equal(text.code, 0, text.stderr)
      const lines = text.stdout.trim().split('\n')
      assert.match(lines[0] ?? '', /^ID +SUBSCRIPTION +PLANTID +STATUS +ATTEMPT +AT +HTTPSTATUS +ERROR/)
      const rows = lines.slice(1)
      assert.equal(rows.length, 3, text.stdout)
      for (const [i, [attempt, detail]] of [
        ['3/3', /503 +HTTP 503/],
        ['2/3', / timeout after 1000 ms/],
        ['1/3', /500 +HTTP 500/],
      ].entries()) {
        assert.ok(rows[i]?.startsWith(row.id), rows[i])
        assert.ok(rows[i]?.includes(` ${attempt} `), rows[i])
        assert.match(rows[i] ?? '', detail as RegExp)
      }
    })

    it("fails a removed subscriber's pending delivery and keeps its attempts apart from why", async (t) => {
      const ctx = await setup(t, { WEBHOOK_BACKOFF_BASE_MS: '60000', WEBHOOK_BACKOFF_MAX_MS: '60000' })
      const receiver = await ctx.receiver()
      receiver.answer = () => 500
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":16,"name":"Orphan"}')).status, 200)
      await waitFor('first attempt', async () => (await ctx.stored())[0]?.attempts === 1)
      const [subscription] = JSON.parse((await runCli(['webhooks', 'list', '--json'], ctx.env)).stdout) as {
        id: string
      }[]
      assert.ok(subscription)
      assert.equal((await runCli(['webhooks', 'remove', subscription.id], ctx.env)).code, 0)
      const [row] = await ctx.deliveries('--failed')
      assert.deepEqual(
        [
          row?.status,
          row?.lastError,
          row?.nextAttempt,
          row?.recentAttempts.map((a) => [a.httpStatus, a.error]),
        ],
        ['failed', 'subscription removed', null, [[500, 'HTTP 500']]],
      )
      const text = await runCli(['webhooks', 'deliveries', '--failed'], ctx.env)
      const [removal, attempt, ...rest] = text.stdout.trim().split('\n').slice(1)
      assert.deepEqual(rest, [], text.stdout)
      assert.match(removal ?? '', / failed +subscription removed$/)
      assert.match(attempt ?? '', / failed +1\/1 +\S+ +500 +HTTP 500$/)
      assert.equal(receiver.received.length, 1)
    })

    it('counts a timeout as a failed attempt', async (t) => {
      // Long enough that each send reaches the receiver (in this process) before it is given up,
      // even on a loaded machine: at 200 ms, one send was aborted before it arrived.
      const ctx = await setup(t, {
        WEBHOOK_TIMEOUT_MS: '1000',
        WEBHOOK_LEASE_MS: '2000',
        WEBHOOK_MAX_ATTEMPTS: '2',
      })
      const receiver = await ctx.receiver()
      receiver.answer = () => 'hold'
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":14,"name":"Silent receiver"}')).status, 200)
      const [row] = await ctx.failed(1)
      assert.equal(row?.lastError, 'timeout after 1000 ms')
      assert.equal(row?.lastStatus, null)
      assert.equal(row?.attempts, 2)
      assert.equal(receiver.received.length, 2)
    })
  })
}
