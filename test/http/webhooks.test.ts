import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, it, type TestContext } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { loadConfig } from '../../src/config.js'
import {
  type BackoffPolicy,
  backoffDelayMs,
  nextRetryAt,
  nominalScheduleMs,
} from '../../src/webhooks/backoff.js'
import { generateWebhookSecret, isWebhookSecret, signWebhook } from '../../src/webhooks/signer.js'
import { request, runCli, type SpawnedService, serviceEnv, spawnService, testStores } from '../helpers.js'

/** Short budgets so retries and failures happen within a test. */
const FAST: Record<string, string> = {
  LOG_LEVEL: 'info',
  WEBHOOK_POLL_MS: '50',
  WEBHOOK_BACKOFF_BASE_MS: '50',
  WEBHOOK_BACKOFF_MAX_MS: '200',
  WEBHOOK_MAX_ATTEMPTS: '3',
  WEBHOOK_TIMEOUT_MS: '500',
  WEBHOOK_LEASE_MS: '1000',
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls until `check` returns something truthy; fails after `timeoutMs` with `what`. */
async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 10_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      const value = await check()
      if (value) return value as NonNullable<T>
    } catch (error) {
      last = error
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`)
    await sleep(25)
  }
}

interface Received {
  method: string
  webhookId: string
  timestamp: string
  signature: string
  contentType: string
  body: string
  /** null when the signature checked out with the `standardwebhooks` verifier. */
  verifyError: string | null
  /** What the receiver answered; undefined while it holds the request. */
  answered?: number
}

type Answer = number | 'hold'

/**
 * A subscriber: a real HTTP server that verifies every request with the Standard Webhooks
 * reference library (not our signer) and answers as the test says, or holds the request open.
 */
class Receiver {
  readonly received: Received[] = []
  secret = ''
  answer: (n: number, received: Received) => Answer = () => 200
  private readonly held: { response: http.ServerResponse; received: Received }[] = []

  private constructor(private readonly server: http.Server) {}

  static async start(port = 0): Promise<Receiver> {
    const server = http.createServer()
    const receiver = new Receiver(server)
    server.on('request', (req, res) => receiver.handle(req, res))
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => resolve())
    })
    return receiver
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks/plants`
  }

  /** Requests this receiver holds without having answered. */
  get holding(): Received[] {
    return this.held.filter((h) => !h.response.destroyed).map((h) => h.received)
  }

  get ids(): string[] {
    return this.received.map((r) => r.webhookId)
  }

  /** Distinct webhook-ids answered with a 2xx. */
  acknowledged(): Set<string> {
    return new Set(this.received.filter((r) => r.answered && r.answered < 300).map((r) => r.webhookId))
  }

  /** Answers every request held so far. */
  release(status = 200): void {
    for (const { response, received } of this.held.splice(0)) {
      if (response.destroyed) continue
      received.answered = status
      response.writeHead(status).end()
    }
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      const header = (name: string) => String(req.headers[name] ?? '')
      const received: Received = {
        method: req.method ?? '',
        webhookId: header('webhook-id'),
        timestamp: header('webhook-timestamp'),
        signature: header('webhook-signature'),
        contentType: header('content-type'),
        body,
        verifyError: null,
      }
      try {
        new Webhook(this.secret).verify(
          body,
          {
            'webhook-id': received.webhookId,
            'webhook-timestamp': received.timestamp,
            'webhook-signature': received.signature,
          },
          { jsonParse: false },
        )
      } catch (error) {
        received.verifyError = error instanceof Error ? error.message : String(error)
      }
      this.received.push(received)
      const answer = this.answer(this.received.length, received)
      if (answer === 'hold') {
        this.held.push({ response: res, received })
        return
      }
      received.answered = answer
      res.writeHead(answer, { 'content-type': 'text/plain' }).end('ok')
    })
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

/** A port that was free a moment ago and has nothing listening now. */
async function closedPort(): Promise<number> {
  const server = http.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

interface DeliveryRow {
  id: string
  subscription: string
  plantId: string
  status: 'pending' | 'delivered' | 'failed'
  attempts: number
  lastStatus: number | null
  lastError: string | null
  nextAttempt: string | null
  created: string
}

async function stopService(service: SpawnedService): Promise<void> {
  if (service.child.exitCode !== null || service.child.signalCode !== null) return
  service.child.kill('SIGTERM')
  const stopped = await Promise.race([service.exited.then(() => true), sleep(10_000).then(() => false)])
  if (!stopped) {
    service.child.kill('SIGKILL')
    await service.exited
  }
}

for (const store of testStores()) {
  describe(`webhooks (${store})`, () => {
    /** A fresh store, the service running on it, an API token, and cleanup registered on `t`. */
    async function setup(t: TestContext, extra: Record<string, string> = {}) {
      const env = await serviceEnv(store, { ...FAST, ...extra })
      const created = await runCli(['tokens', 'create', '--name', 'webhooks-test'], env)
      assert.equal(created.code, 0, created.stderr)
      const token = created.stdout.trim()
      const services: SpawnedService[] = []
      const receivers: Receiver[] = []
      const ctx = {
        env,
        token,
        service: undefined as unknown as SpawnedService,
        async start(): Promise<SpawnedService> {
          const service = await spawnService(env)
          services.push(service)
          ctx.service = service
          return service
        },
        async receiver(port = 0): Promise<Receiver> {
          const receiver = await Receiver.start(port)
          receivers.push(receiver)
          return receiver
        },
        /** `webhooks add URL`, as an operator runs it; returns the secret it prints. */
        async addSubscriber(url: string): Promise<string> {
          const result = await runCli(['webhooks', 'add', url], env)
          assert.equal(result.code, 0, result.stderr)
          const secret = result.stdout.trim()
          assert.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/)
          return secret
        },
        /** Subscribes the receiver and hands it the secret to verify with. */
        async subscribe(receiver: Receiver): Promise<void> {
          receiver.secret = await ctx.addSubscriber(receiver.url)
        },
        post(body: string) {
          return request('POST', `${ctx.service.url}/plants`, { token, body })
        },
        async deliveries(...flags: string[]): Promise<DeliveryRow[]> {
          const result = await runCli(['webhooks', 'deliveries', '--json', ...flags], env)
          assert.equal(result.code, 0, result.stderr)
          return JSON.parse(result.stdout) as DeliveryRow[]
        },
        output: () => services.map((s) => s.output()).join('\n'),
      }
      t.after(async () => {
        for (const receiver of receivers) receiver.release(503)
        await Promise.all(services.map(stopService))
        await Promise.all(receivers.map((r) => r.close()))
      })
      return ctx
    }

    it('POSTs the exact NewPlant JSON, signed per Standard Webhooks, with the delivery id as webhook-id', async (t) => {
      const ctx = await setup(t)
      const receiver = await ctx.receiver()
      await ctx.subscribe(receiver)
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
        const rows = await ctx.deliveries()
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
        (await ctx.deliveries()).every((row) => row.status === 'delivered'),
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
        const rows = await ctx.deliveries()
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

    it('retries while the receiver is down and delivers once it is up', async (t) => {
      const ctx = await setup(t, { WEBHOOK_MAX_ATTEMPTS: '100' })
      const port = await closedPort()
      const url = `http://127.0.0.1:${port}/hooks/plants`
      const secret = await ctx.addSubscriber(url)
      await ctx.start()
      assert.equal((await ctx.post('{"id":11,"name":"Down"}')).status, 200)
      const [failing] = await waitFor('a refused attempt', async () => {
        const rows = await ctx.deliveries()
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
      await waitFor('delivered status', async () => (await ctx.deliveries())[0]?.status === 'delivered')
    })

    it('marks a delivery failed after the attempt budget and lists it with --failed', async (t) => {
      const ctx = await setup(t)
      const receiver = await ctx.receiver()
      receiver.answer = () => 500
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":12,"name":"Doomed"}')).status, 200)
      assert.equal((await ctx.post('{"id":13,"name":"Also doomed"}')).status, 200)
      const failed = await waitFor('two failed deliveries', async () => {
        const rows = await ctx.deliveries('--failed')
        return rows.length === 2 ? rows : undefined
      })
      for (const row of failed) {
        assert.equal(row.status, 'failed')
        assert.equal(row.attempts, 3)
        assert.equal(row.lastStatus, 500)
        assert.equal(row.lastError, 'HTTP 500')
        assert.equal(row.nextAttempt, null)
      }
      assert.deepEqual(failed.map((row) => row.plantId).sort(), ['12', '13'])
      await sleep(300)
      assert.equal(receiver.received.length, 6, 'exactly the budget: 3 attempts each')
      for (const row of failed) assert.equal(receiver.ids.filter((id) => id === row.id).length, 3)

      const text = await runCli(['webhooks', 'deliveries', '--failed'], ctx.env)
      assert.equal(text.code, 0, text.stderr)
      assert.match(text.stdout, /HTTP 500/)
      for (const row of failed) assert.ok(text.stdout.includes(row.id))
    })

    it('counts a timeout as a failed attempt', async (t) => {
      const ctx = await setup(t, { WEBHOOK_TIMEOUT_MS: '200', WEBHOOK_MAX_ATTEMPTS: '2' })
      const receiver = await ctx.receiver()
      receiver.answer = () => 'hold'
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":14,"name":"Silent receiver"}')).status, 200)
      const [row] = await waitFor('failed after timeouts', async () => {
        const rows = await ctx.deliveries('--failed')
        return rows.length === 1 ? rows : undefined
      })
      assert.equal(row?.lastError, 'timeout after 200 ms')
      assert.equal(row?.lastStatus, null)
      assert.equal(row?.attempts, 2)
      assert.equal(receiver.received.length, 2)
    })

    it('does not let a slow subscriber hold up a fast one', async (t) => {
      const ctx = await setup(t, { WEBHOOK_TIMEOUT_MS: '30000', WEBHOOK_LEASE_MS: '60000' })
      const slow = await ctx.receiver()
      const fast = await ctx.receiver()
      slow.answer = () => 'hold'
      await ctx.subscribe(slow)
      await ctx.subscribe(fast)
      await ctx.start()
      for (let id = 1; id <= 6; id++)
        assert.equal((await ctx.post(`{"id":${id},"name":"P${id}"}`)).status, 200)
      await waitFor('all six at the fast subscriber', () => fast.acknowledged().size === 6)
      // Meanwhile the slow one has answered nothing and still holds what it got.
      assert.ok(slow.holding.length >= 1)
      assert.ok(slow.received.every((r) => r.answered === undefined))
      assert.ok(fast.received.every((r) => r.verifyError === null))

      // Once it answers, its backlog drains too.
      slow.answer = () => 200
      slow.release(200)
      await waitFor('all six at the slow subscriber', () => slow.acknowledged().size === 6)
    })

    it('does not let twenty hanging subscribers hold up a healthy one', async (t) => {
      const ctx = await setup(t, { WEBHOOK_TIMEOUT_MS: '30000', WEBHOOK_LEASE_MS: '60000' })
      const hanging = await ctx.receiver()
      hanging.answer = () => 'hold'
      // Twenty subscriptions (one receiver, twenty paths): 20 x 4 sends would fill a shared limit of 64.
      for (let i = 0; i < 20; i++) await ctx.addSubscriber(`${hanging.url}/slow${i}`)
      const healthy = await ctx.receiver()
      await ctx.subscribe(healthy)
      await ctx.start()
      for (let id = 1; id <= 10; id++)
        assert.equal((await ctx.post(`{"id":${id},"name":"P${id}"}`)).status, 200)
      await waitFor('all ten at the healthy subscriber', () => healthy.acknowledged().size === 10, 8_000)
      assert.ok(hanging.holding.length >= 64, `only ${hanging.holding.length} sends held by the hanging ones`)
    })

    it('answers POST /plants without waiting for subscribers', async (t) => {
      const ctx = await setup(t, { WEBHOOK_TIMEOUT_MS: '30000', WEBHOOK_LEASE_MS: '60000' })
      const receiver = await ctx.receiver()
      receiver.answer = () => 'hold'
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":21,"name":"First"}')).status, 200)
      await waitFor('the first event held', () => receiver.holding.length === 1)
      // The receiver holds an event unanswered, yet another create completes.
      assert.equal((await ctx.post('{"id":22,"name":"Second"}')).status, 200)
      assert.equal(receiver.holding.length >= 1, true)
      assert.ok(receiver.received.every((r) => r.answered === undefined))
      // And its own event goes out after the 200, still unanswered.
      await waitFor('the second event held', () => receiver.holding.length === 2)
    })

    it('loses nothing across kill -9 mid-delivery', async (t) => {
      // Held sends must not time out before the kill; the lease then bounds the wait after restart.
      const ctx = await setup(t, { WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_LEASE_MS: '4000' })
      const receiver = await ctx.receiver()
      receiver.answer = () => 'hold'
      await ctx.subscribe(receiver)
      const first = await ctx.start()
      for (let id = 31; id <= 33; id++) {
        assert.equal((await ctx.post(`{"id":${id},"name":"Crash ${id}"}`)).status, 200)
      }
      await waitFor('all three sends in flight', () => new Set(receiver.ids).size === 3)
      const heldIds = new Set(receiver.ids)

      first.child.kill('SIGKILL')
      await first.exited
      receiver.answer = () => 200
      // Created while no worker runs: still in the outbox.
      await ctx.start()
      assert.equal((await ctx.post('{"id":34,"name":"After restart"}')).status, 200)

      await waitFor('all four delivered after restart', () => receiver.acknowledged().size === 4, 15_000)
      const acknowledged = receiver.acknowledged()
      for (const id of heldIds)
        assert.ok(acknowledged.has(id), `event ${id} delivered with the same webhook-id`)
      assert.ok(receiver.received.every((r) => r.verifyError === null))
      const rows = await waitFor('all recorded delivered', async () => {
        const list = await ctx.deliveries()
        return list.length === 4 && list.every((row) => row.status === 'delivered') ? list : undefined
      })
      assert.deepEqual(new Set(rows.map((row) => row.id)), acknowledged)
      assert.deepEqual(rows.map((row) => row.plantId).sort(), ['31', '32', '33', '34'])
    })

    it('drains on SIGTERM: a send still held is recorded as interrupted, then resent right after restart', async (t) => {
      // The send (timeout 6 s) outlives the stop grace (5 s), so stop() aborts it and records it as
      // due at once; the restarted worker sends it again without waiting for its 60 s lease.
      const ctx = await setup(t, { WEBHOOK_TIMEOUT_MS: '6000', WEBHOOK_LEASE_MS: '60000' })
      const receiver = await ctx.receiver()
      receiver.answer = () => 'hold'
      await ctx.subscribe(receiver)
      const first = await ctx.start()
      assert.equal((await ctx.post('{"id":51,"name":"Held at shutdown"}')).status, 200)
      await waitFor('the send in flight', () => receiver.holding.length === 1)
      const heldId = receiver.ids[0]

      first.child.kill('SIGTERM')
      assert.equal(await first.exited, 0, first.output())
      assert.match(first.output(), /aborting webhook sends still in flight/)
      const [row] = await ctx.deliveries()
      assert.equal(row?.status, 'pending')
      assert.equal(row?.attempts, 1, 'the interrupted send is an attempt the operator can see')
      assert.match(row?.lastError ?? '', /^interrupted: the worker stopped/)

      receiver.answer = () => 200
      await ctx.start()
      // Well inside the lease: the send is due at once, not when its lease runs out.
      await waitFor('delivery right after restart', () => receiver.acknowledged().has(heldId ?? ''), 10_000)
    })

    it('resumes pending deliveries after a restart when the worker was off', async (t) => {
      const ctx = await setup(t, { WEBHOOK_WORKER: 'false' })
      const receiver = await ctx.receiver()
      await ctx.subscribe(receiver)
      const first = await ctx.start()
      assert.equal((await ctx.post('{"id":41,"name":"Queued"}')).status, 200)
      const [pending] = await ctx.deliveries()
      assert.equal(pending?.status, 'pending')
      assert.equal(pending?.attempts, 0)
      await stopService(first)
      assert.equal(receiver.received.length, 0)

      ctx.env.WEBHOOK_WORKER = 'true'
      await ctx.start()
      await waitFor('the queued event', () => receiver.acknowledged().size === 1)
      assert.equal(receiver.received[0]?.webhookId, pending?.id)
    })
  })

  describe(`webhooks CLI (${store})`, () => {
    let env: Record<string, string>
    const cli = (...args: string[]) => runCli(['webhooks', ...args], env)

    it('adds, lists without secrets, and removes subscriptions', async () => {
      env = await serviceEnv(store)
      const added = await cli('add', 'https://example.com/hooks/plants')
      assert.equal(added.code, 0, added.stderr)
      const secret = added.stdout.trim()
      assert.ok(isWebhookSecret(secret), secret)
      assert.equal(added.stdout, `${secret}\n`, 'the secret alone on stdout')
      const id = /(sub_\w+)/.exec(added.stderr)?.[1]
      assert.ok(id, added.stderr)

      const listed = await cli('list', '--json')
      assert.equal(listed.code, 0, listed.stderr)
      assert.deepEqual(
        JSON.parse(listed.stdout).map((s: { id: string; url: string }) => [s.id, s.url]),
        [[id, 'https://example.com/hooks/plants']],
      )
      assert.ok(!listed.stdout.includes(secret.slice(6)))
      const table = await cli('list')
      assert.match(table.stdout, /^ID\s+URL\s+CREATED/)
      assert.ok(table.stdout.includes(id) && !table.stdout.includes(secret.slice(6)))

      assert.equal((await cli('remove', id)).code, 0)
      const again = await cli('remove', id)
      assert.equal(again.code, 1)
      assert.match(again.stderr, /no webhook subscription/)
      assert.deepEqual(JSON.parse((await cli('list', '--json')).stdout), [])
    })

    for (const url of [
      'ftp://example.com/x',
      '/relative',
      'example.com/hook',
      'http://user:pw@example.com/',
      `https://example.com/${'a'.repeat(2030)}`,
    ]) {
      it(`refuses ${url.slice(0, 60)} with a usage error`, async () => {
        env = await serviceEnv(store)
        const result = await cli('add', url)
        assert.equal(result.code, 2)
        assert.equal(result.stdout, '')
      })
    }

    it('refuses a bad --limit and an unknown action', async () => {
      env = await serviceEnv(store)
      assert.equal((await cli('deliveries', '--limit', '0')).code, 2)
      assert.equal((await cli('deliveries', '--limit', 'x')).code, 2)
      assert.equal((await cli('frobnicate')).code, 2)
      const empty = await cli('deliveries', '--json')
      assert.equal(empty.code, 0, empty.stderr)
      assert.deepEqual(JSON.parse(empty.stdout), [])
    })
  })
}

describe('webhook signing and backoff', () => {
  it('generates whsec_ secrets of 32 random bytes', () => {
    const secret = generateWebhookSecret()
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
    assert.equal(Buffer.from(secret.slice(6), 'base64').length, 32)
    assert.notEqual(generateWebhookSecret(), secret)
  })

  it('signs so that the standardwebhooks verifier accepts it, and rejects tampering', () => {
    const secret = generateWebhookSecret()
    const body = '{"id":9223372036854775807,"name":"Fern"}'
    const headers = signWebhook(secret, 'msg_1', body)
    assert.equal(headers['webhook-id'], 'msg_1')
    assert.doesNotThrow(() => new Webhook(secret).verify(body, { ...headers }))
    assert.throws(() => new Webhook(secret).verify(body.replace('Fern', 'Fake'), { ...headers }))
    assert.throws(() => new Webhook(generateWebhookSecret()).verify(body, { ...headers }))
    assert.throws(() => new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'msg_2' }))
  })

  it('re-signs each attempt with its own timestamp', () => {
    const secret = generateWebhookSecret()
    const a = signWebhook(secret, 'msg_1', '{}', new Date(1_700_000_000_000))
    const b = signWebhook(secret, 'msg_1', '{}', new Date(1_700_000_005_000))
    assert.equal(a['webhook-timestamp'], '1700000000')
    assert.equal(b['webhook-timestamp'], '1700000005')
    assert.notEqual(a['webhook-signature'], b['webhook-signature'])
  })

  // The shipped defaults, read the way the service reads them.
  const config = loadConfig({})
  const defaults: BackoffPolicy = {
    baseMs: config.webhookBackoffBaseMs,
    maxMs: config.webhookBackoffMaxMs,
    maxAttempts: config.webhookMaxAttempts,
  }

  it('doubles from the base up to the cap, with jitter within ±25%', () => {
    const mid = () => 0.5
    assert.equal(backoffDelayMs(defaults, 1, mid), 5_000)
    assert.equal(backoffDelayMs(defaults, 2, mid), 10_000)
    assert.equal(backoffDelayMs(defaults, 12, mid), 10_240_000)
    assert.equal(backoffDelayMs(defaults, 13, mid), 3 * 3_600_000)
    assert.equal(backoffDelayMs(defaults, 1000, mid), 3 * 3_600_000)
    assert.equal(
      backoffDelayMs(defaults, 1, () => 0),
      3_750,
    )
    assert.ok(backoffDelayMs(defaults, 1, () => 0.999_999) <= 6_250)
  })

  it('stops after the attempt budget; the defaults span about a day', () => {
    const now = new Date(0)
    assert.ok(nextRetryAt(defaults, 18, now))
    assert.equal(nextRetryAt(defaults, 19, now), null)
    const hours = nominalScheduleMs(defaults) / 3_600_000
    assert.ok(hours > 23 && hours < 25, `${hours} h`)
  })
})
