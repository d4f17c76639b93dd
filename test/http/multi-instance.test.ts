/** Several independent `serve` processes on one PostgreSQL: races on one id, token revocation, webhooks. */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  skipUnless,
  createToken,
  postgresHint,
  runCli,
  type SpawnedService,
  type StoreKind,
  serviceEnv,
  spawnService,
  stopService,
  waitFor,
} from '../helpers.js'
import { request } from '../http-client.js'
import { Receiver } from './webhook-harness.js'

/**
 * Whether the TCP connection whose client end is `clientPort` (and server end `serverPort`) belongs to
 * process `pid`: /proc/net/tcp gives the socket's inode, /proc/PID/fd lists the process's sockets.
 */
function connectionOwnedBy(pid: number, clientPort: number, serverPort: number): boolean {
  let inode: string | undefined
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string
    try {
      text = readFileSync(file, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/)
      if (cols.length < 10) continue
      const local = Number.parseInt(cols[1]?.split(':').pop() ?? '', 16)
      const remote = Number.parseInt(cols[2]?.split(':').pop() ?? '', 16)
      if (local === clientPort && remote === serverPort) inode = cols[9]
    }
  }
  if (!inode || inode === '0') return false
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`
      } catch {
        return false
      }
    })
  } catch {
    return false
  }
}

const plantIdOf = (body: string) => /"id":(\d+)/.exec(body)?.[1] ?? ''

const store: StoreKind = 'postgres'

describe(
  'three instances on one PostgreSQL',
  { skip: skipUnless(!!process.env.TEST_DATABASE_URL, 'TEST_DATABASE_URL', postgresHint) },
  () => {
    const instances: SpawnedService[] = []
    const receivers: Receiver[] = []
    let env: Record<string, string>
    let token: string

    /** A receiver, started and subscribed through the CLI, that knows its signing secret. */
    async function subscribedReceiver(): Promise<Receiver> {
      const receiver = await Receiver.start()
      receivers.push(receiver)
      const added = await runCli(['webhooks', 'add', receiver.url], env)
      assert.equal(added.code, 0, added.stderr)
      receiver.secret = added.stdout.trim()
      return receiver
    }

    before(async () => {
      env = await serviceEnv(store, { WEBHOOK_POLL_MS: '50', WEBHOOK_ALLOW_PRIVATE: 'true' })
      token = await createToken(env, 'multi-instance')
      for (let i = 0; i < 3; i++) instances.push(await spawnService({ ...env, KEEP_DATABASE: '1' }))
      assert.equal(new Set(instances.map((s) => s.url)).size, 3)
    })

    after(async () => {
      await Promise.all(instances.map(stopService))
      await Promise.all(receivers.map((r) => r.close()))
    })

    const post = (i: number, body: string, as = token) =>
      request('POST', `${instances[i % instances.length]?.url}/plants`, { token: as, body })

    it('stores a new id sent to every instance at once exactly once, and answers each copy 200', async () => {
      const ids = Array.from({ length: 30 }, (_, i) => 9223372036854775000n + BigInt(i))
      const copies = 3
      const sends: Promise<{ id: bigint; status: number; text: string }>[] = []
      for (const id of ids) {
        const body = `{"id":${id},"name":"same ${id}","tag":"multi"}`
        for (let instance = 0; instance < 3; instance++) {
          for (let copy = 0; copy < copies; copy++) {
            sends.push(post(instance, body).then((r) => ({ id, status: r.status, text: r.text })))
          }
        }
      }
      const results = await Promise.all(sends)
      assert.equal(results.length, ids.length * 3 * copies)
      for (const result of results) {
        assert.equal(result.status, 200, `id ${result.id}: ${result.text}`)
        assert.equal(result.text, `{"name":"same ${result.id}","tag":"multi"}`)
      }
      for (const [i, id] of ids.entries()) {
        const read = await request('GET', `${instances[i % 3]?.url}/plants/${id}`, { token })
        assert.equal(read.status, 200)
        assert.equal(read.text, `{"id":${id},"name":"same ${id}","tag":"multi"}`)
      }
      const list = await request('GET', `${instances[0]?.url}/plants?tag=multi&limit=1000`, { token })
      assert.equal(list.status, 200)
      const listed = [...list.text.matchAll(/"id":(\d+)/g)].map((m) => m[1])
      assert.deepEqual(
        listed,
        ids.map((id) => String(id)),
        'each id is listed exactly once, in order',
      )
    })

    it('gives exactly one of several conflicting bodies a 200 and the rest 409, and stores the winner', async () => {
      const ids = Array.from({ length: 20 }, (_, i) => 5000n + BigInt(i))
      const variants = 6
      const all = await Promise.all(
        ids.map(async (id) => {
          const results = await Promise.all(
            Array.from({ length: variants }, (_, v) =>
              post(v, `{"id":${id},"name":"variant ${v}"}`).then((r) => ({
                v,
                status: r.status,
                json: r.json,
              })),
            ),
          )
          return { id, results }
        }),
      )
      for (const { id, results } of all) {
        const winners = results.filter((r) => r.status === 200)
        const losers = results.filter((r) => r.status === 409)
        assert.equal(winners.length, 1, `id ${id}: ${JSON.stringify(results)}`)
        assert.equal(losers.length, variants - 1, `id ${id}: ${JSON.stringify(results)}`)
        for (const loser of losers) {
          assert.equal(loser.json.error, 409)
          assert.equal(loser.json.code, 'PLANT_CONFLICT')
        }
        const winner = winners[0]?.v
        for (let i = 0; i < 3; i++) {
          const read = await request('GET', `${instances[i]?.url}/plants/${id}`, { token })
          assert.equal(read.text, `{"id":${id},"name":"variant ${winner}"}`, `instance ${i} reads the winner`)
        }
      }
    })

    it('stops a token revoked with the CLI on every instance within 1 s (the token cache bound)', async (t) => {
      const victim = await createToken(env, 'revoke-me')
      const listed = await runCli(['tokens', 'list', '--json'], env)
      assert.equal(listed.code, 0, listed.stderr)
      const id = (JSON.parse(listed.stdout) as { id: string; name: string }[]).find(
        (t) => t.name === 'revoke-me',
      )?.id as string
      assert.ok(id)
      const probe = (i: number) => request('GET', `${instances[i]?.url}/plants?limit=1`, { token: victim })

      // Every instance has the token cached (and keeps refreshing it) when the revocation lands.
      for (let i = 0; i < 3; i++) assert.equal((await probe(i)).status, 200)
      let revokedAt = Number.POSITIVE_INFINITY
      const samples: { instance: number; startedMs: number; status: number }[] = []
      const loops = [0, 1, 2].map(async (instance) => {
        for (;;) {
          const started = performance.now()
          const { status } = await probe(instance)
          samples.push({ instance, startedMs: started - revokedAt, status })
          if (started > revokedAt + 1_500) return
          await sleep(10)
        }
      })
      await waitFor('every instance to be probed a few times', () =>
        [0, 1, 2].every((instance) => samples.filter((s) => s.instance === instance).length >= 3),
      )
      const revoked = await runCli(['tokens', 'revoke', id], env)
      revokedAt = performance.now()
      assert.equal(revoked.code, 0, revoked.stderr)
      await Promise.all(loops)

      const firsts: number[] = []
      for (let instance = 0; instance < 3; instance++) {
        const mine = samples.filter((s) => s.instance === instance && Number.isFinite(s.startedMs))
        const first401 = mine.find((s) => s.status === 401)
        assert.ok(first401, `instance ${instance} still accepted the token 1.5 s after the revocation`)
        firsts.push(Math.round(first401.startedMs))
        assert.ok(
          first401.startedMs <= 1_100,
          `instance ${instance} first refused the token ${Math.round(first401.startedMs)} ms after the revocation`,
        )
        const lateAccept = mine.find((s) => s.status === 200 && s.startedMs > 1_000)
        assert.equal(
          lateAccept,
          undefined,
          `instance ${instance} accepted a request sent > 1 s after revoking`,
        )
        assert.ok(
          // After a hundred 401s from one address in a minute, failures are 429s (docs/limits.md).
          mine
            .filter((s) => s.startedMs > first401.startedMs)
            .every((s) => s.status === 401 || s.status === 429),
          `instance ${instance} accepted the token again after refusing it`,
        )
      }
      t.diagnostic(`first 401 per instance, ms after \`tokens revoke\` returned: ${firsts.join(', ')}`)
    })

    it('delivers each webhook event exactly once although every instance runs a delivery worker', async () => {
      const receiver = await subscribedReceiver()

      const ids = Array.from({ length: 60 }, (_, i) => 70_000 + i)
      const created = await Promise.all(ids.map((id, i) => post(i, `{"id":${id},"name":"hook ${id}"}`)))
      for (const response of created) assert.equal(response.status, 200, response.text)

      await waitFor('60 webhook events', () => receiver.acknowledged().size === ids.length, 30_000)
      // Longer than a poll interval and a send: a duplicate claim would show up by now.
      await sleep(1_500)
      const byId = new Map<string, number>()
      for (const r of receiver.received) byId.set(r.webhookId, (byId.get(r.webhookId) ?? 0) + 1)
      const repeated = [...byId].filter(([, n]) => n > 1)
      assert.deepEqual(repeated, [], 'no webhook-id was delivered twice')
      assert.equal(receiver.received.length, ids.length)
      assert.ok(
        receiver.received.every((r) => r.verifyError === null),
        'every request carries a valid signature',
      )
      assert.deepEqual(
        receiver.received.map((r) => Number(plantIdOf(r.body))).sort((a, b) => a - b),
        ids,
        'one event per created plant',
      )

      // Retire this subscriber so the next test sees only its own.
      const subs = await runCli(['webhooks', 'list', '--json'], env)
      const sub = (JSON.parse(subs.stdout) as { id: string; url: string }[]).find(
        (s) => s.url === receiver.url,
      )
      assert.ok(sub)
      assert.equal((await runCli(['webhooks', 'remove', sub.id], env)).code, 0)
    })

    it('loses no event when an instance is killed mid-delivery: its lease expires and another delivers', async (t) => {
      const receiver = await subscribedReceiver()

      // A fourth instance with a short lease (the send timeout must stay below it). It is killed
      // the moment its first send arrives, well inside that timeout, so it dies holding its sends.
      const doomed = await spawnService({
        ...env,
        KEEP_DATABASE: '1',
        WEBHOOK_LEASE_MS: '1500',
        WEBHOOK_TIMEOUT_MS: '1000',
      })
      instances.push(doomed)
      const doomedPid = doomed.child.pid as number
      let killed = false
      receiver.answer = (_n, r) =>
        !killed && connectionOwnedBy(doomedPid, r.remotePort, receiver.port) ? 'hold' : 200

      // Create plants through all four until the doomed instance has claimed and is sending some.
      const created: number[] = []
      const deadline = Date.now() + 20_000
      while (receiver.holding.length === 0) {
        assert.ok(Date.now() < deadline, 'the doomed instance never claimed a delivery')
        const id = 80_000 + created.length
        // Round robin over all four instances (the doomed one is the fourth).
        const response = await post(created.length, `{"id":${id},"name":"kill ${id}"}`)
        assert.equal(response.status, 200, response.text)
        created.push(id)
        await sleep(15)
      }
      doomed.child.kill('SIGKILL')
      await doomed.exited
      killed = true
      // Everything the doomed instance was sending (its sockets died with it, unanswered).
      const heldByDoomed = receiver.received.filter((r) => r.answered === undefined).map((r) => r.webhookId)
      assert.ok(heldByDoomed.length > 0)

      // A few more after the kill, so the survivors are busy with new work too.
      for (let i = 0; i < 5; i++) {
        const id = 80_000 + created.length
        assert.equal((await post(i % 3, `{"id":${id},"name":"kill ${id}"}`)).status, 200)
        created.push(id)
      }
      await waitFor(
        'every event acknowledged',
        () => {
          const acked = receiver.acknowledged()
          const plants = new Set([...acked.values()].map((r) => Number(plantIdOf(r.body))))
          return created.every((id) => plants.has(id)) && heldByDoomed.every((id) => acked.has(id))
        },
        20_000,
      )
      const acked = receiver.acknowledged()
      for (const id of heldByDoomed) {
        const redelivery = acked.get(id)
        assert.ok(redelivery, `event ${id} was held by the killed instance and never delivered elsewhere`)
        assert.ok(!connectionOwnedBy(doomedPid, redelivery.remotePort, receiver.port))
      }
      assert.ok(receiver.received.every((r) => r.verifyError === null))
      t.diagnostic(
        `the killed instance held ${heldByDoomed.length} sends; ${created.length} events, all acknowledged`,
      )
    })
  },
)
