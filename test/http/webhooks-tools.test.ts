/** The operator's webhook tools: `webhooks retry` and `webhooks test`, against a real subscriber. */
import assert from 'node:assert/strict'
import { describe, it, type TestContext } from 'node:test'
import { runCli, testStores, waitFor } from '../helpers.js'
import { setupWebhooks } from './webhook-harness.js'

for (const store of testStores()) {
  describe(`webhooks: retry and test (${store})`, () => {
    const setup = (t: TestContext, extra?: Record<string, string>) => setupWebhooks(store, t, extra)

    it('retry sends a failed delivery again as its next attempt, with the same webhook-id', async (t) => {
      const ctx = await setup(t)
      const receiver = await ctx.receiver()
      receiver.answer = () => 500
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":21,"name":"Late"}')).status, 200)
      assert.equal((await ctx.post('{"id":22,"name":"Later"}')).status, 200)
      const failed = await ctx.failed(2)
      const idOf = (plantId: string) => failed.find((row) => row.plantId === plantId)?.id as string
      const [first, second] = [idOf('21'), idOf('22')]

      receiver.answer = () => 204
      const one = await runCli(['webhooks', 'retry', first], ctx.env)
      assert.equal(one.code, 0, one.stderr)
      assert.equal(one.stdout, `requeued ${first}\n`)
      const delivered = await waitFor('the retried delivery', async () =>
        (await ctx.stored()).find((row) => row.id === first && row.status === 'delivered'),
      )
      assert.equal(delivered.attempts, 4, 'three failed attempts, then the retry')
      assert.deepEqual(
        delivered.recentAttempts.map((a) => [a.attempt, a.httpStatus]),
        [
          [4, 204],
          [3, 500],
          [2, 500],
          [1, 500],
        ],
      )
      const sent = receiver.received.filter((r) => r.webhookId === first)
      assert.equal(sent.length, 4)
      const last = sent.at(-1)
      assert.equal(last?.verifyError, null, 'signed afresh with the subscription secret')
      assert.equal(last?.body, '{"id":21,"name":"Late"}')
      assert.equal((await ctx.deliveries('--failed')).map((row) => row.id).join(), second)

      // A delivery that is not failed any more is not requeued, and the command says so.
      const again = await runCli(['webhooks', 'retry', first], ctx.env)
      assert.equal(again.code, 1)
      assert.match(again.stderr, new RegExp(`not requeued: ${first}: no failed delivery with that id`))
      const all = await runCli(['webhooks', 'retry', '--failed'], ctx.env)
      assert.equal(all.code, 0, all.stderr)
      assert.equal(all.stdout, `requeued ${second}\n`)
      await waitFor('every delivery delivered', async () =>
        (await ctx.stored()).every((row) => row.status === 'delivered'),
      )
    })

    it('retry leaves failed the deliveries of a removed subscription, and refuses a bad command line', async (t) => {
      const ctx = await setup(t)
      const receiver = await ctx.receiver()
      receiver.answer = () => 500
      await ctx.subscribe(receiver)
      await ctx.start()
      assert.equal((await ctx.post('{"id":31,"name":"Orphan"}')).status, 200)
      const [row] = await ctx.failed(1)
      const id = (await runCli(['webhooks', 'list', '--json'], ctx.env)).stdout.match(/sub_\w+/)?.[0]
      assert.ok(id)
      assert.equal((await runCli(['webhooks', 'remove', id], ctx.env)).code, 0)
      const retried = await runCli(['webhooks', 'retry', '--failed'], ctx.env)
      assert.equal(retried.code, 0, retried.stderr)
      assert.equal(retried.stdout, '')
      assert.match(retried.stderr, /^0 deliveries are due now/)
      assert.equal((await ctx.deliveries('--failed'))[0]?.id, row?.id)
      for (const args of [[], ['--failed', 'msg_x'], ['--bogus']]) {
        const result = await runCli(['webhooks', 'retry', ...args], ctx.env)
        assert.equal(result.code, 2, args.join(' '))
        assert.match(result.stderr, /Usage:\n {2}plant-store webhooks retry/)
      }
    })

    it("test sends a signed sample event and prints the receiver's status and body", async (t) => {
      const ctx = await setup(t)
      const receiver = await ctx.receiver()
      receiver.answer = () => 202
      await ctx.subscribe(receiver)
      const id = (await runCli(['webhooks', 'list', '--json'], ctx.env)).stdout.match(/sub_\w+/)?.[0]
      assert.ok(id)
      // No service is running: the test event goes out from the command itself, not the outbox.
      const result = await runCli(['webhooks', 'test', id], ctx.env)
      assert.equal(result.code, 0, result.stderr)
      assert.equal(result.stdout, 'HTTP 202\nok\n')
      const [received] = receiver.received
      assert.equal(receiver.received.length, 1)
      assert.equal(received?.verifyError, null)
      assert.match(received?.webhookId ?? '', /^msg_test_[0-9a-f]{24}$/)
      assert.match(result.stderr, new RegExp(`sending ${received?.webhookId} to ${receiver.url}`))
      assert.equal(received?.contentType, 'application/json')
      assert.deepEqual(JSON.parse(received?.body ?? ''), {
        id: 0,
        name: 'plant-store webhooks test',
        tag: 'test',
      })
      assert.deepEqual(await ctx.deliveries(), [], 'nothing is stored')

      receiver.answer = () => 410
      const refused = await runCli(['webhooks', 'test', id], ctx.env)
      assert.equal(refused.code, 1)
      assert.equal(refused.stdout, 'HTTP 410\nok\n')
      assert.match(refused.stderr, /did not acknowledge the test event \(HTTP 410\)/)
      await receiver.close()
      const down = await runCli(['webhooks', 'test', id], ctx.env)
      assert.equal(down.code, 1)
      assert.match(down.stderr, /no answer from .*ECONNREFUSED/)
      const unknown = await runCli(['webhooks', 'test', 'sub_nope'], ctx.env)
      assert.equal(unknown.code, 1)
      assert.match(unknown.stderr, /no webhook subscription with id sub_nope/)
    })
  })
}
