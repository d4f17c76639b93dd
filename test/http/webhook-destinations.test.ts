/** Where webhooks may go: non-public destinations are refused when added and when connecting. */
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, it } from 'node:test'
import { runCli, serviceEnv, testStores, waitFor } from '../helpers.js'
import { setupWebhooks } from './webhook-harness.js'

const REFUSED_AT_ADD = [
  ['http://169.254.169.254/latest/meta-data', '169.254.169.254', 'linkLocal'],
  ['http://localhost:22/', 'localhost', 'loopback'],
  ['http://[::1]:6379/', '::1', 'loopback'],
  ['http://2130706433/hook', '127.0.0.1', 'loopback'],
  ['http://0x7f.1/hook', '127.0.0.1', 'loopback'],
  ['http://10.1.2.3/hook', '10.1.2.3', 'private'],
  ['http://192.168.0.10/hook', '192.168.0.10', 'private'],
  ['http://100.64.0.1/hook', '100.64.0.1', 'carrierGradeNat'],
  ['http://0.0.0.0:8080/hook', '0.0.0.0', 'unspecified'],
  ['http://[::ffff:127.0.0.1]/hook', '::ffff:7f00:1', 'loopback'],
  ['http://[fe80::1]/hook', 'fe80::1', 'linkLocal'],
  ['http://[fd00::1]/hook', 'fd00::1', 'uniqueLocal'],
  ['http://224.0.0.1/hook', '224.0.0.1', 'multicast'],
  ['http://[::127.0.0.1]/hook', '::7f00:1', 'ipv4Compatible'],
  ['http://[2002:7f00:1::1]/hook', '2002:7f00:1::1', '6to4'],
  ['http://[64:ff9b::10.0.0.1]/hook', '64:ff9b::a00:1', 'rfc6052'],
] as const

for (const store of testStores()) {
  describe(`webhook destinations (${store})`, () => {
    it('webhooks add refuses a non-public address written literally, saying why, unless WEBHOOK_ALLOW_PRIVATE', async () => {
      const env = await serviceEnv(store)
      for (const [url, host, range] of REFUSED_AT_ADD) {
        const refused = await runCli(['webhooks', 'add', url], env)
        assert.equal(refused.code, 2, `${url}: ${refused.stderr}`)
        assert.equal(refused.stdout, '')
        assert.ok(refused.stderr.includes(`${host}`), `${url}: ${refused.stderr}`)
        assert.ok(refused.stderr.includes(`a ${range} address, is not public`), `${url}: ${refused.stderr}`)
        assert.match(refused.stderr, /WEBHOOK_ALLOW_PRIVATE=true/)
      }
      const allowed = await runCli(['webhooks', 'add', 'http://[::1]:6379/'], {
        ...env,
        WEBHOOK_ALLOW_PRIVATE: 'true',
      })
      assert.equal(allowed.code, 0, allowed.stderr)
      // A public address and a name are taken: a name is judged when a delivery connects.
      for (const url of ['https://93.184.215.14/hook', 'https://hooks.example.com/plants']) {
        const added = await runCli(['webhooks', 'add', url], env)
        assert.equal(added.code, 0, `${url}: ${added.stderr}`)
      }
      const listed = JSON.parse((await runCli(['webhooks', 'list', '--json'], env)).stdout)
      assert.deepEqual(listed.map((s: { url: string }) => s.url).sort(), [
        'http://[::1]:6379/',
        'https://93.184.215.14/hook',
        'https://hooks.example.com/plants',
      ])
    })

    it('refuses at connect time a loopback address, and a name that resolves to one, recording why', async (t) => {
      const ctx = await setupWebhooks(store, t, { WEBHOOK_ALLOW_PRIVATE: 'false', WEBHOOK_MAX_ATTEMPTS: '1' })
      const receiver = await ctx.receiver()
      // Added while allowed (or while the name resolved elsewhere): the send must still be refused.
      const allowAdd = { ...ctx.env, WEBHOOK_ALLOW_PRIVATE: 'true' }
      for (const url of [receiver.url, `http://localhost:${receiver.port}/hooks/plants`]) {
        const added = await runCli(['webhooks', 'add', url], allowAdd)
        assert.equal(added.code, 0, added.stderr)
      }
      await ctx.start()
      assert.equal((await ctx.post('{"id":41,"name":"Nowhere"}')).status, 200)
      const failed = await ctx.failed(2)
      const errors = failed.map((row) => row.lastError ?? '').sort()
      assert.match(errors[0] ?? '', /^destination refused: 127\.0\.0\.1, a loopback address, is not public/)
      assert.match(
        errors[1] ?? '',
        /^destination refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address, is not public/,
      )
      for (const row of failed) assert.equal(row.lastStatus, null)
      assert.equal(receiver.received.length, 0, 'nothing reached the receiver')
    })

    it('reads at most 64 KiB of an answer and counts its status', async (t) => {
      const ctx = await setupWebhooks(store, t)
      let finished: boolean | undefined
      const endless = http.createServer((req, res) => {
        req.resume()
        req.on('end', () => {
          res.writeHead(200, { 'content-type': 'text/plain' })
          const chunk = Buffer.alloc(64 * 1024, 'x')
          let sent = 0
          const pump = () => {
            while (sent < 256 * 1024 * 1024 && !res.destroyed) {
              sent += chunk.length
              if (!res.write(chunk)) return void res.once('drain', pump)
            }
            res.end()
          }
          res.on('close', () => (finished = res.writableFinished))
          pump()
        })
      })
      await new Promise<void>((resolve) => endless.listen(0, '127.0.0.1', resolve))
      t.after(() => new Promise<void>((resolve) => endless.close(() => resolve())))
      await ctx.addSubscriber(`http://127.0.0.1:${(endless.address() as AddressInfo).port}/hook`)
      await ctx.start()
      assert.equal((await ctx.post('{"id":42,"name":"Chatty"}')).status, 200)
      const [row] = await waitFor('delivered status', async () => {
        const rows = await ctx.stored()
        return rows[0]?.status === 'delivered' ? rows : undefined
      })
      assert.equal(row?.lastStatus, 200)
      await waitFor('the answer to be cut off', () => finished !== undefined)
      assert.equal(finished, false, 'the sender closed the connection before the 256 MiB answer ended')
    })
  })
}
