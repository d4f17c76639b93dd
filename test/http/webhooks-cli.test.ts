/** The operator's `webhooks` CLI: subscriptions and the deliveries listing. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { isWebhookSecret } from '../../src/webhooks/signer.js'
import { runCli, serviceEnv, testStores } from '../helpers.js'

for (const store of testStores()) {
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
      'http://example.com:0/hook',
      `https://example.com/${'a'.repeat(2030)}`,
      // Typos the URL parser would repair into http://example.com/ or drop silently.
      'http:///example.com/hook',
      'http:example.com/hook',
      'https:\\\\example.com/hook',
      'https://example.com/hook#fragment',
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
      assert.equal((await cli('add', 'https://example.com/made-the-store')).code, 0)
      const empty = await cli('deliveries', '--json')
      assert.equal(empty.code, 0, empty.stderr)
      assert.deepEqual(JSON.parse(empty.stdout), [])
    })

    it('adds a second subscription to one URL (a secret rotation), and says so', async () => {
      env = await serviceEnv(store)
      const first = await cli('add', 'https://example.com/rotating')
      const firstId = /(sub_\w+)/.exec(first.stderr)?.[1]
      assert.ok(firstId, first.stderr)
      assert.doesNotMatch(first.stderr, /note:/)
      const second = await cli('add', 'https://example.com/rotating')
      assert.equal(second.code, 0, second.stderr)
      assert.match(second.stderr, new RegExp(`note: ${firstId} also sends to this URL`))
      assert.equal(JSON.parse((await cli('list', '--json')).stdout).length, 2)
    })
  })
}
