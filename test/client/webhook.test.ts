/** verifyWebhook on a real delivery: the service signs, the client verifies and reads the id exactly. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { PlantStoreClient, verifyWebhook, WebhookVerificationError } from '@plant-store/client'
import { waitFor } from '../helpers.js'
import { setupWebhooks } from '../http/webhook-harness.js'

describe('@plant-store/client: verifyWebhook', () => {
  it('verifies a delivery of a plant created by the client and returns its bigint id', async (t) => {
    const ctx = await setupWebhooks('sqlite', t)
    const receiver = await ctx.receiver()
    await ctx.subscribe(receiver)
    const service = await ctx.start()
    const client = new PlantStoreClient({ baseUrl: service.url, token: ctx.token })
    await client.createPlant({ id: 9007199254740993n, name: 'Announced', tag: 'hook' })

    await waitFor('the delivery', () => receiver.received.length === 1)
    const [got] = receiver.received
    assert.ok(got)
    const headers = {
      'Webhook-Id': got.webhookId,
      'Webhook-Timestamp': got.timestamp,
      'Webhook-Signature': got.signature,
    }
    assert.deepEqual(verifyWebhook(got.body, headers, receiver.secret), {
      id: 9007199254740993n,
      name: 'Announced',
      tag: 'hook',
    })
    // The raw bytes and a Headers object, as a fetch-style server hands them over.
    assert.equal(
      verifyWebhook(new TextEncoder().encode(got.body), new Headers(headers), receiver.secret).id,
      9007199254740993n,
    )

    const tampered = got.body.replace('9007199254740993', '9007199254740992')
    assert.throws(() => verifyWebhook(tampered, headers, receiver.secret), WebhookVerificationError)
    const otherSecret = `whsec_${Buffer.from('another secret of 32 bytes......').toString('base64')}`
    assert.throws(() => verifyWebhook(got.body, headers, otherSecret), WebhookVerificationError)
    assert.throws(
      () => verifyWebhook(got.body, { ...headers, 'Webhook-Timestamp': '1' }, receiver.secret),
      WebhookVerificationError,
    )
  })
})
