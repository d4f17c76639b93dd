import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { loadConfig } from '../../src/config.js'
import {
  type BackoffPolicy,
  backoffDelayMs,
  nextRetryAt,
  nominalScheduleMs,
} from '../../src/webhooks/backoff.js'
import { generateWebhookSecret, signWebhook } from '../../src/webhooks/signer.js'

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
