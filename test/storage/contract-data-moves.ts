import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { Storage } from '../../src/storage/storage.js'
import { type ContractContext, create, payloadOf, plant } from './fixtures.js'

const failAll = async (store: Storage, now: Date) => {
  const leased = await store.claimDeliveries({
    owner: 'w',
    now,
    leaseUntil: new Date(now.getTime() + 60_000),
    limit: 100,
    perSubscription: 100,
    excludeSubscriptions: [],
  })
  for (const d of leased) {
    await store.recordAttempt({
      deliveryId: d.id,
      leaseOwner: 'w',
      ok: false,
      status: 500,
      error: 'HTTP 500',
      at: now,
      retryAt: null,
    })
  }
  return leased.map((d) => d.id).sort()
}

/** What `export`, `import` and `webhooks retry` rely on: plant pages as text, and requeuing. */
export function dataMovesContract(ctx: ContractContext): void {
  describe('data moves', () => {
    it('exports every plant by ascending id, as the API JSON text, a page at a time', async () => {
      const s = ctx.store()
      const plants = [
        plant(2n ** 63n - 1n, 'max'),
        plant(-(2n ** 63n), 'min', 'edge'),
        plant(2n ** 53n + 1n, 'past doubles', '🌵'),
        plant(5n, 'five "quoted"'),
      ]
      for (const p of plants) await create(s, p)
      const sorted = [...plants].sort((a, b) => (a.id < b.id ? -1 : 1))
      const first = await s.exportPlants(undefined, 3)
      assert.deepEqual(first.lines, sorted.slice(0, 3).map(payloadOf))
      assert.equal(first.lastId, sorted[2]?.id)
      const rest = await s.exportPlants(first.lastId, 3)
      assert.deepEqual(rest.lines, [payloadOf(sorted[3] as (typeof sorted)[number])])
      assert.equal(rest.lastId, 2n ** 63n - 1n)
      assert.deepEqual(await s.exportPlants(rest.lastId, 3), { lines: [], lastId: undefined })
    })

    it('requeues failed deliveries, due now and unleased, except those of a removed subscription', async () => {
      const s = ctx.store()
      for (const id of ['s1', 's2'])
        await s.addSubscription({
          id,
          url: `https://example.test/${id}`,
          secret: `whsec_${id}`,
          createdAt: new Date(),
        })
      for (let i = 1; i <= 2; i++) await create(s, plant(BigInt(i), `p${i}`))
      const failed = await failAll(s, new Date())
      assert.equal(failed.length, 4)
      const deliveries = await s.listDeliveries({ failedOnly: true, limit: 10 })
      const ofS2 = deliveries.filter((d) => d.subscriptionId === 's2').map((d) => d.id)
      const [one] = deliveries.filter((d) => d.subscriptionId === 's1').map((d) => d.id)
      assert.ok(one)
      await s.removeSubscription('s2')

      const now = new Date(Date.now() + 1000)
      assert.deepEqual(await s.requeueFailedDeliveries([one, 'msg_unknown', ...ofS2], now), [one])
      assert.deepEqual(await s.requeueFailedDeliveries([one], now), [], 'pending now, not failed')
      const requeued = (await s.listDeliveries({ failedOnly: false, limit: 10 })).find((d) => d.id === one)
      assert.deepEqual([requeued?.status, requeued?.attempts, requeued?.nextAttemptAt], ['pending', 1, now])
      const rest = await s.requeueFailedDeliveries(undefined, now)
      assert.equal(rest.length, 1)
      assert.deepEqual(
        (await s.listDeliveries({ failedOnly: true, limit: 10 })).map((d) => d.id).sort(),
        [...ofS2].sort(),
      )
      // The worker's claim picks them up as its next attempt.
      assert.equal((await failAll(s, now)).length, 2)
    })
  })
}
