/** Webhook delivery under trouble: slow and hanging subscribers, kill -9, SIGTERM and restarts. */
import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'
import { stopService, testStores, waitFor } from '../helpers.js'
import { setupWebhooks } from './webhook-harness.js'

for (const store of testStores()) {
  describe(`webhooks: resilience (${store})`, () => {
    const setup = (t: TestContext, extra?: Record<string, string>) => setupWebhooks(store, t, extra)

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
      for (let i = 0; i < 20; i++) await ctx.addSubscriberHere(`${hanging.url}/slow${i}`)
      const healthy = await ctx.receiver()
      await ctx.subscribe(healthy)
      await ctx.start()
      for (let id = 1; id <= 10; id++)
        assert.equal((await ctx.post(`{"id":${id},"name":"P${id}"}`)).status, 200)
      await waitFor('all ten at the healthy subscriber', () => healthy.acknowledged().size === 10, 8_000)
      // The healthy one can finish before the hanging ones have claimed their share: wait for them to
      // hold what a shared limit of 64 would allow, then a new plant must still reach it.
      await waitFor('64 sends held by the hanging ones', () => hanging.holding.length >= 64, 8_000)
      assert.equal((await ctx.post('{"id":11,"name":"P11"}')).status, 200)
      await waitFor('all eleven at the healthy subscriber', () => healthy.acknowledged().size === 11, 8_000)
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
        const list = await ctx.stored()
        return list.length === 4 && list.every((row) => row.status === 'delivered') ? list : undefined
      })
      assert.deepEqual(new Set(rows.map((row) => row.id)), new Set(acknowledged.keys()))
      assert.deepEqual(rows.map((row) => row.plantId).sort(), ['31', '32', '33', '34'])
    })

    // With 1 attempt allowed, the interrupted one was the last: it must not fail the delivery.
    for (const maxAttempts of ['3', '1']) {
      it(`drains on SIGTERM: a send still held is recorded as interrupted, then resent right after restart (WEBHOOK_MAX_ATTEMPTS=${maxAttempts})`, async (t) => {
        // The send (timeout 6 s) outlives the stop grace (5 s), so stop() aborts it and records it as
        // due at once; the restarted worker sends it again without waiting for its 60 s lease.
        const ctx = await setup(t, {
          WEBHOOK_TIMEOUT_MS: '6000',
          WEBHOOK_LEASE_MS: '60000',
          WEBHOOK_MAX_ATTEMPTS: maxAttempts,
        })
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
        await waitFor('recorded delivered', async () => (await ctx.stored())[0]?.status === 'delivered')
      })
    }

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
}
