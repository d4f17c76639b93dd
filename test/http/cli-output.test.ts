/** What the CLI prints of what came from outside never drives the terminal it is printed on. */
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, it } from 'node:test'
import { loadConfig } from '../../src/config.js'
import { openStorage } from '../../src/storage/open.js'
import { runCli, serviceEnv } from '../helpers.js'

/**
 * A new window title (OSC 0), a cleared screen, fake red text, the clipboard written (OSC 52),
 * the same through the C1 forms (CSI U+009B, OSC U+009D, ST U+009C), DEL and a carriage return.
 */
const HOSTILE =
  'ok\x1b]0;pwned\x07\x1b[2J\x1b[31mFAKE\x1b[0m\x1b]52;c;cm0gLXJmIC8K\x07\x9b2J\x9d0;t\x9c\x7f\rend'
/** A control character that is neither \n nor \t, in the decoded output. */
// eslint-disable-next-line no-control-regex -- what the test looks for
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/

function assertInert(what: string, result: { stdout: string; stderr: string }): void {
  for (const [stream, text] of Object.entries({ stdout: result.stdout, stderr: result.stderr })) {
    const found = RAW_CONTROL.exec(text)
    assert.equal(found, null, `${what}: ${stream} holds U+${found?.[0].charCodeAt(0).toString(16)}: ${text}`)
  }
}

/** A webhook receiver whose every answer is HOSTILE, with `status`. */
async function hostileReceiver(): Promise<{ url: string; status: number; close(): Promise<void> }> {
  const receiver = { url: '', status: 200, close: async () => {} }
  const server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => res.writeHead(receiver.status, { 'content-type': 'text/plain' }).end(HOSTILE))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`
  receiver.close = () => new Promise<void>((resolve) => server.close(() => resolve()))
  return receiver
}

describe('CLI output from outside', () => {
  it('escapes control characters from a hostile receiver, names, URLs and delivery errors; JSON keeps their values', async (t) => {
    const env = await serviceEnv('sqlite', { WEBHOOK_ALLOW_PRIVATE: 'true' })
    const receiver = await hostileReceiver()
    t.after(() => receiver.close())
    const added = await runCli(['webhooks', 'add', receiver.url], env)
    assert.equal(added.code, 0, added.stderr)
    const subscription = /added subscription (sub_\w+)/.exec(added.stderr)?.[1] as string

    const answered = await runCli(['webhooks', 'test', subscription], env)
    assert.equal(answered.code, 0, answered.stderr)
    assertInert('webhooks test (200)', answered)
    assert.ok(answered.stdout.startsWith('HTTP 200\nok\\u001b]0;pwned\\u0007'), answered.stdout)
    assert.ok(
      answered.stdout.includes('\\u001b]52;c;cm0gLXJmIC8K\\u0007\\u009b2J\\u009d0;t\\u009c\\u007f\\u000dend'),
    )
    receiver.status = 500
    const refused = await runCli(['webhooks', 'test', subscription], env)
    assert.equal(refused.code, 1)
    assertInert('webhooks test (500)', refused)

    // What only the store holds: a token named, a subscription URL and a delivery error as hostile.
    const storage = await openStorage(loadConfig(env))
    try {
      const now = new Date()
      await storage.createToken({
        id: 'tok_hostile',
        name: HOSTILE,
        scopes: ['plants:read'],
        hash: 'x'.repeat(64),
        createdAt: now,
        expiresAt: null,
        lastUsedAt: null,
        revokedAt: null,
      })
      await storage.addSubscription({
        id: 'sub_hostile',
        url: `https://example.com/${HOSTILE}`,
        secret: 's',
        createdAt: now,
      })
      await storage.createPlant({ id: 1n, name: HOSTILE, tag: HOSTILE })
      const claimedAt = new Date(Date.now() + 1000)
      const claimed = await storage.claimDeliveries({
        owner: 'test',
        now: claimedAt,
        leaseUntil: new Date(claimedAt.getTime() + 60_000),
        limit: 10,
        perSubscription: 10,
        excludeSubscriptions: [],
      })
      assert.equal(claimed.length, 2)
      for (const delivery of claimed)
        await storage.recordAttempt({
          deliveryId: delivery.id,
          leaseOwner: 'test',
          ok: false,
          status: 502,
          error: HOSTILE,
          at: claimedAt,
          retryAt: null,
        })
    } finally {
      await storage.close()
    }

    for (const command of [
      ['tokens', 'list'],
      ['webhooks', 'list'],
      ['webhooks', 'deliveries'],
      ['export'],
    ]) {
      const result = await runCli(command, env)
      assert.equal(result.code, 0, `${command.join(' ')}: ${result.stderr}`)
      assertInert(command.join(' '), result)
      assert.ok(result.stdout.includes('\\u001b]52;c;'), `${command.join(' ')}: ${result.stdout}`)
    }
    const json = async (command: string[]) => {
      const result = await runCli(command, env)
      assert.equal(result.code, 0, result.stderr)
      assertInert(command.join(' '), result)
      return JSON.parse(result.stdout)
    }
    const tokens = (await json(['tokens', 'list', '--json'])) as { name: string }[]
    assert.equal(tokens[0]?.name, HOSTILE, 'the same value, escaped as JSON escapes')
    const subscriptions = (await json(['webhooks', 'list', '--json'])) as { url: string }[]
    assert.ok(subscriptions.some((s) => s.url === `https://example.com/${HOSTILE}`))
    const deliveries = (await json(['webhooks', 'deliveries', '--json'])) as { lastError: string }[]
    assert.deepEqual(
      deliveries.map((d) => d.lastError),
      [HOSTILE, HOSTILE],
    )
    assert.deepEqual(await json(['export']), { id: 1, name: HOSTILE, tag: HOSTILE })
  })
})
