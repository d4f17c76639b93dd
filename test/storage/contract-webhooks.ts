import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type {
  AttemptResult,
  ClaimRequest,
  Delivery,
  LeasedDelivery,
  Storage,
} from '../../src/storage/storage.js'
import { at, type ContractContext, create, payloadOf, plant } from './fixtures.js'

const MINUTE = 60_000

function subscription(id: string, createdAtMs = 0) {
  return { id, url: `https://example.test/hooks/${id}`, secret: `whsec_${id}`, createdAt: at(createdAtMs) }
}

/** A claim by `owner` at `now` (default: the real clock, since deliveries fall due at creation). */
function claim(
  store: Storage,
  owner: string,
  overrides: Partial<ClaimRequest> = {},
): Promise<LeasedDelivery[]> {
  const now = overrides.now ?? new Date()
  return store.claimDeliveries({
    owner,
    now,
    leaseUntil: new Date(now.getTime() + MINUTE),
    limit: 100,
    perSubscription: 100,
    excludeSubscriptions: [],
    ...overrides,
  })
}

const ids = (deliveries: Delivery[]) => deliveries.map((d) => d.id).sort()
const all = (store: Storage) => store.listDeliveries({ failedOnly: false, limit: 1000 })
const byId = async (store: Storage, id: string) => (await all(store)).find((d) => d.id === id)

/** Subscribers s1..sN and `plants` plants: N × plants pending deliveries. */
async function seed(store: Storage, subscribers: number, plants: number): Promise<void> {
  for (let i = 1; i <= subscribers; i++) await store.addSubscription(subscription(`s${i}`, i))
  for (let i = 1; i <= plants; i++) await create(store, plant(BigInt(i), `p${i}`))
}

/** The webhook half of the storage contract: subscriptions and the delivery outbox. */
export function webhookContract(ctx: ContractContext): void {
  describe('webhook subscriptions', () => {
    it('adds, lists by creation time and removes subscriptions', async () => {
      const s = ctx.store()
      await s.addSubscription(subscription('b', 2))
      await s.addSubscription(subscription('a', 1))
      await s.addSubscription(subscription('c', 2))
      assert.deepEqual(await s.listSubscriptions(), [
        subscription('a', 1),
        subscription('b', 2),
        subscription('c', 2),
      ])
      await assert.rejects(s.addSubscription(subscription('a', 3)), 'ids are unique')
      assert.equal(await s.removeSubscription('b'), true)
      assert.equal(await s.removeSubscription('b'), false)
      assert.deepEqual(
        (await s.listSubscriptions()).map((x) => x.id),
        ['a', 'c'],
      )
    })
  })

  describe('webhook outbox', () => {
    it('enqueues one delivery per subscriber on create, none on replay or conflict', async () => {
      const s = ctx.store()
      const before = Date.now()
      await create(s, plant(1n, 'lonely'))
      assert.deepEqual(await all(s), [], 'no subscriber, no delivery')
      await s.addSubscription(subscription('s1'))
      await s.addSubscription(subscription('s2'))
      const p = plant(9223372036854775807n, 'fern', 'green')
      await create(s, p)
      await create(s, p)
      await create(s, plant(p.id, 'other'))
      const deliveries = await all(s)
      assert.equal(deliveries.length, 2)
      assert.deepEqual(deliveries.map((d) => d.subscriptionId).sort(), ['s1', 's2'])
      for (const d of deliveries) {
        assert.match(d.id, /^msg_[0-9a-f]{32}$/)
        assert.equal(d.plantId, p.id)
        assert.equal(d.payload, payloadOf(p))
        assert.equal(d.status, 'pending')
        assert.equal(d.attempts, 0)
        assert.deepEqual([d.lastAttemptAt, d.lastStatus, d.lastError], [null, null, null])
        assert.ok(d.createdAt.getTime() >= before - 1000 && d.createdAt.getTime() <= Date.now() + 1000)
        assert.ok(d.nextAttemptAt.getTime() <= Date.now(), 'due at once')
      }
      assert.notEqual(deliveries[0]?.id, deliveries[1]?.id)
    })

    it("writes the payload as the plant's exact JSON text, whatever characters it holds", async () => {
      const s = ctx.store()
      await s.addSubscription(subscription('s1'))
      const plants = [
        plant(-9223372036854775808n, 'quote " back \\ slash', 'tab\tnew\nline\u0001\u001f\u007f\b\f\r'),
        plant(1n, 'ünïcødé 🌱 \u2028\u2029 </script>'),
        plant(9007199254740993n, "it's", ''),
      ]
      await Promise.all(plants.map((p) => create(s, p)))
      const payloads = new Map((await all(s)).map((d) => [d.plantId, d.payload]))
      for (const p of plants) assert.equal(payloads.get(p.id), payloadOf(p), p.name)
    })

    it('leases a claim to its owner, with url and secret, until the lease runs out', async () => {
      const s = ctx.store()
      const other = await ctx.another()
      await seed(s, 2, 2)
      const now = new Date()
      const first = await claim(s, 'worker-a', { now })
      assert.equal(first.length, 4)
      for (const d of first) {
        const sub = subscription(d.subscriptionId)
        assert.deepEqual([d.url, d.secret, d.status], [sub.url, sub.secret, 'pending'])
      }
      const sorted = [...first].sort((a, b) => a.nextAttemptAt.getTime() - b.nextAttemptAt.getTime())
      assert.deepEqual(ids(first), ids(sorted))
      assert.deepEqual(await claim(s, 'worker-a', { now }), [], 'leased rows are not claimed again')
      assert.deepEqual(await claim(other, 'worker-b', { now: new Date(now.getTime() + MINUTE - 1) }), [])
      const expired = new Date(now.getTime() + MINUTE + 1)
      const second = await claim(other, 'worker-b', { now: expired })
      assert.deepEqual(ids(second), ids(first), 'an expired lease is claimable again')
    })

    it('ignores an attempt recorded by an owner that lost the lease', async () => {
      const s = ctx.store()
      await seed(s, 1, 1)
      const now = new Date()
      const [d] = await claim(s, 'worker-a', { now })
      assert.ok(d)
      const result = { deliveryId: d.id, ok: true, status: 200, error: null, at: now, retryAt: null }
      await s.recordAttempt({ ...result, leaseOwner: 'intruder' })
      assert.equal((await byId(s, d.id))?.attempts, 0)
      await claim(s, 'worker-b', { now: new Date(now.getTime() + 2 * MINUTE) })
      await s.recordAttempt({ ...result, leaseOwner: 'worker-a' })
      assert.deepEqual([(await byId(s, d.id))?.status, (await byId(s, d.id))?.attempts], ['pending', 0])
      await s.recordAttempt({ ...result, leaseOwner: 'worker-b' })
      assert.deepEqual([(await byId(s, d.id))?.status, (await byId(s, d.id))?.attempts], ['delivered', 1])
      await s.recordAttempt({ ...result, leaseOwner: 'worker-b' })
      assert.equal((await byId(s, d.id))?.attempts, 1, 'a finished delivery takes no more attempts')
    })

    it('keeps every attempt in the history, newest first, and none of a lost lease', async () => {
      const s = ctx.store()
      await seed(s, 1, 2)
      const start = new Date()
      const later = (minutes: number) => new Date(start.getTime() + minutes * MINUTE)
      const [a, b] = await claim(s, 'w', { now: start })
      assert.ok(a && b)
      const record = (
        id: string,
        owner: string,
        at: Date,
        outcome: Omit<AttemptResult, 'deliveryId' | 'leaseOwner' | 'at'>,
      ) => s.recordAttempt({ deliveryId: id, leaseOwner: owner, at, ...outcome })
      await record(b.id, 'w', start, { ok: false, status: 410, error: 'HTTP 410', retryAt: null })
      await record(a.id, 'w', start, {
        ok: false,
        status: null,
        error: 'timeout after 10000 ms',
        retryAt: later(2),
      })
      assert.deepEqual(ids(await claim(s, 'w2', { now: later(2) })), [a.id])
      await record(a.id, 'intruder', later(2), { ok: true, status: 200, error: null, retryAt: null })
      await record(a.id, 'w2', later(2), { ok: false, status: 500, error: 'HTTP 500', retryAt: later(5) })
      assert.deepEqual(ids(await claim(s, 'w3', { now: later(5) })), [a.id])
      await record(a.id, 'w3', later(5), { ok: true, status: 204, error: null, retryAt: null })
      await record(a.id, 'w3', later(6), { ok: false, status: 500, error: 'HTTP 500', retryAt: null })

      const history = await s.listAttempts([a.id, b.id], 10)
      assert.deepEqual(
        history.filter((x) => x.deliveryId === a.id),
        [
          { deliveryId: a.id, attempt: 3, at: later(5), status: 204, error: null },
          { deliveryId: a.id, attempt: 2, at: later(2), status: 500, error: 'HTTP 500' },
          { deliveryId: a.id, attempt: 1, at: start, status: null, error: 'timeout after 10000 ms' },
        ],
        "the lost lease's and the finished delivery's attempts are not in it",
      )
      assert.deepEqual(
        history.filter((x) => x.deliveryId === b.id),
        [{ deliveryId: b.id, attempt: 1, at: start, status: 410, error: 'HTTP 410' }],
      )
      assert.deepEqual(
        (await s.listAttempts([a.id], 2)).map((x) => x.attempt),
        [3, 2],
        'the newest `each`',
      )
      assert.deepEqual(await s.listAttempts([], 5), [])
      assert.deepEqual(await s.listAttempts(['msg_unknown'], 5), [])
      const delivered = await byId(s, a.id)
      assert.deepEqual([delivered?.status, delivered?.attempts], ['delivered', 3])
    })

    it('bounds a claim by limit and perSubscription', async () => {
      const s = ctx.store()
      await seed(s, 3, 4)
      const bySub = (ds: Delivery[]) => {
        const counts: Record<string, number> = {}
        for (const d of ds) counts[d.subscriptionId] = (counts[d.subscriptionId] ?? 0) + 1
        return counts
      }
      const now = new Date()
      const fair = await claim(s, 'w', { now, perSubscription: 2 })
      assert.deepEqual(bySub(fair), { s1: 2, s2: 2, s3: 2 })
      const limited = await claim(s, 'w', { now, perSubscription: 10, limit: 4 })
      assert.equal(limited.length, 4)
      assert.equal((await claim(s, 'w', { now })).length, 2, 'the rest')
      assert.deepEqual(await claim(s, 'w', { now }), [])
    })

    it('skips excluded subscribers', async () => {
      const s = ctx.store()
      await seed(s, 3, 2)
      const now = new Date()
      const got = await claim(s, 'w', { now, excludeSubscriptions: ['s1', 's3'] })
      assert.deepEqual([...new Set(got.map((d) => d.subscriptionId))], ['s2'])
      assert.equal(got.length, 2)
      const rest = await claim(s, 'w', { now, excludeSubscriptions: ['s2'] })
      assert.deepEqual(rest.map((d) => d.subscriptionId).sort(), ['s1', 's1', 's3', 's3'])
    })

    it('retries at retryAt, and fails for good without one', async () => {
      const s = ctx.store()
      await seed(s, 1, 2)
      const now = new Date()
      const [a, b] = await claim(s, 'w', { now })
      assert.ok(a && b)
      const retryAt = new Date(now.getTime() + 10 * MINUTE)
      await s.recordAttempt({
        deliveryId: a.id,
        leaseOwner: 'w',
        ok: false,
        status: 503,
        error: 'HTTP 503',
        at: now,
        retryAt,
      })
      await s.recordAttempt({
        deliveryId: b.id,
        leaseOwner: 'w',
        ok: false,
        status: null,
        error: 'timeout',
        at: now,
        retryAt: null,
      })
      const retried = await byId(s, a.id)
      assert.deepEqual(
        [
          retried?.status,
          retried?.attempts,
          retried?.lastStatus,
          retried?.lastError,
          retried?.nextAttemptAt,
          retried?.lastAttemptAt,
        ],
        ['pending', 1, 503, 'HTTP 503', retryAt, now],
      )
      const failed = await byId(s, b.id)
      assert.deepEqual([failed?.status, failed?.lastStatus, failed?.lastError], ['failed', null, 'timeout'])
      assert.deepEqual(await claim(s, 'w', { now: new Date(retryAt.getTime() - 1) }), [], 'not due yet')
      assert.deepEqual(
        ids(await claim(s, 'w', { now: retryAt })),
        [a.id],
        'due at retryAt; failed never again',
      )
      assert.deepEqual(ids(await s.listDeliveries({ failedOnly: true, limit: 10 })), [b.id])
    })

    it('fails the pending deliveries of a removed subscriber, and only those', async () => {
      const s = ctx.store()
      await seed(s, 2, 2)
      const now = new Date()
      const leased = await claim(s, 'w', { now })
      const doneId = leased.find((d) => d.subscriptionId === 's1')?.id
      assert.ok(doneId)
      await s.recordAttempt({
        deliveryId: doneId,
        leaseOwner: 'w',
        ok: true,
        status: 204,
        error: null,
        at: now,
        retryAt: null,
      })
      assert.equal(await s.removeSubscription('s1'), true)
      const after = await all(s)
      for (const d of after) {
        if (d.id === doneId) assert.equal(d.status, 'delivered')
        else if (d.subscriptionId === 's1')
          assert.deepEqual([d.status, d.lastError], ['failed', 'subscription removed'])
        else assert.equal(d.status, 'pending')
      }
      const again = await claim(s, 'w2', { now: new Date(now.getTime() + 2 * MINUTE) })
      assert.deepEqual(
        again.map((d) => d.subscriptionId),
        ['s2', 's2'],
      )
      assert.equal(await s.removeSubscription('s1'), false)
    })

    it('records a send in flight when its subscriber is removed: delivered if acknowledged, else failed', async () => {
      const s = ctx.store()
      await seed(s, 1, 2)
      const now = new Date()
      const [acked, refused] = await claim(s, 'w', { now })
      assert.ok(acked && refused)
      assert.equal(await s.removeSubscription('s1'), true)
      const attempt = (id: string, outcome: Partial<AttemptResult>, owner = 'w') =>
        s.recordAttempt({
          deliveryId: id,
          leaseOwner: owner,
          at: now,
          ok: false,
          status: null,
          error: null,
          retryAt: null,
          ...outcome,
        })
      await attempt(refused.id, { ok: false, status: 500, error: 'HTTP 500' }, 'intruder')
      await attempt(acked.id, { ok: true, status: 204 })
      await attempt(refused.id, { status: 500, error: 'HTTP 500', retryAt: new Date(now.getTime() + MINUTE) })
      await attempt(refused.id, { status: 500, error: 'HTTP 500' })

      const delivered = await byId(s, acked.id)
      assert.deepEqual(
        [delivered?.status, delivered?.attempts, delivered?.lastStatus, delivered?.lastError],
        ['delivered', 1, 204, null],
      )
      const failed = await byId(s, refused.id)
      assert.deepEqual(
        [failed?.status, failed?.attempts, failed?.lastStatus, failed?.lastError],
        ['failed', 1, 500, 'subscription removed'],
        'failed as removed, never due again, and its attempt counted once',
      )
      const history = await s.listAttempts([acked.id, refused.id], 5)
      assert.deepEqual(
        history.map((a) => [a.deliveryId, a.attempt, a.status, a.error]).sort(),
        [
          [acked.id, 1, 204, null],
          [refused.id, 1, 500, 'HTTP 500'],
        ].sort(),
      )
      assert.deepEqual(await claim(s, 'w2', { now: new Date(now.getTime() + 2 * MINUTE) }), [])
    })

    it('lists deliveries newest first, limited, optionally only failed ones', async () => {
      const s = ctx.store()
      await s.addSubscription(subscription('s1'))
      for (let i = 1; i <= 3; i++) {
        await create(s, plant(BigInt(i), `p${i}`))
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
      assert.deepEqual(
        (await all(s)).map((d) => d.plantId),
        [3n, 2n, 1n],
      )
      assert.deepEqual(
        (await s.listDeliveries({ failedOnly: false, limit: 2 })).map((d) => d.plantId),
        [3n, 2n],
      )
      assert.deepEqual(await s.listDeliveries({ failedOnly: true, limit: 10 }), [])
      await s.removeSubscription('s1')
      assert.equal((await s.listDeliveries({ failedOnly: true, limit: 10 })).length, 3)
    })

    it('never leases one delivery to two instances claiming at once', async () => {
      const stores = [ctx.store(), await ctx.another(), await ctx.another()]
      await seed(ctx.store(), 3, 20)
      const now = new Date()
      const leased: string[] = []
      for (let round = 0; round < 30; round++) {
        const claims = await Promise.all(
          stores.map((store, i) => claim(store, `w${i}`, { now, limit: 7, perSubscription: 3 })),
        )
        const got = claims.flat()
        if (got.length === 0) break
        leased.push(...got.map((d) => d.id))
      }
      assert.equal(new Set(leased).size, leased.length, 'no delivery leased twice')
      assert.equal(leased.length, 60, 'every delivery leased')
    })
  })
}
