import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { request, startService, type TestService, testStores } from '../helpers.js'

const REALM = 'Bearer realm="plant-store"'

for (const store of testStores()) {
  describe(`bearer authentication (${store})`, () => {
    let service: TestService
    let token: string
    before(async () => {
      service = await startService(store)
      token = await service.token()
    })
    after(() => service.close())

    const operations = [
      ['POST', '/plants'],
      ['GET', '/plants'],
      ['GET', '/plants/1'],
      ['DELETE', '/plants/1'],
    ] as const

    for (const [method, path] of operations) {
      it(`${method} ${path} without credentials is 401 with a Bearer challenge`, async () => {
        const response = await request(method, `${service.url}${path}`, {
          body: method === 'POST' ? { id: 1, name: 'x' } : undefined,
        })
        assert.equal(response.status, 401)
        assert.equal(response.headers.get('www-authenticate'), REALM)
        assert.equal(response.json.error, 401)
        assert.match(response.json.message, /Authorization/)
      })
    }

    it('rejects another scheme with 401', async () => {
      const response = await request('GET', `${service.url}/plants/1`, {
        authorization: `Basic ${btoa('a:b')}`,
      })
      assert.equal(response.status, 401)
      assert.equal(response.headers.get('www-authenticate'), REALM)
      assert.match(response.json.message, /Bearer/)
    })

    it('accepts the scheme name in any case', async () => {
      for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
        const response = await request('GET', `${service.url}/plants/1`, {
          authorization: `${scheme} ${token}`,
        })
        assert.equal(response.status, 404, scheme)
      }
    })

    for (const [label, value] of [
      ['an unknown token', 'Bearer pst_unknownunknownunknownunknownunknown123'],
      ['an empty token', 'Bearer '],
      ['two tokens', 'Bearer a b'],
    ] as const) {
      it(`rejects ${label} with 401 and error="invalid_token"`, async () => {
        const response = await request('GET', `${service.url}/plants/1`, { authorization: value })
        assert.equal(response.status, 401)
        const challenge = response.headers.get('www-authenticate') ?? ''
        assert.ok(challenge.startsWith(REALM), challenge)
        if (label !== 'an empty token') assert.match(challenge, /error="invalid_token"/)
      })
    }

    it('rejects an expired token with invalid_token', async () => {
      const expired = await service.token(undefined, new Date(Date.now() - 1000))
      const response = await request('GET', `${service.url}/plants/1`, { token: expired })
      assert.equal(response.status, 401)
      assert.match(response.headers.get('www-authenticate') ?? '', /error="invalid_token"/)
      assert.match(response.json.message, /expired/)
    })

    it('stops a token at expiry even while it is cached', async () => {
      const shortLived = await service.token(undefined, new Date(Date.now() + 300))
      assert.equal((await request('GET', `${service.url}/plants/1`, { token: shortLived })).status, 404)
      await sleep(400)
      assert.equal((await request('GET', `${service.url}/plants/1`, { token: shortLived })).status, 401)
    })

    it('stops a revoked token within one second', async () => {
      const doomed = await service.token()
      assert.equal((await request('GET', `${service.url}/plants/1`, { token: doomed })).status, 404)
      const [record] = (await service.storage.listTokens())
        .filter((t) => t.lastUsedAt !== null || true)
        .slice(-1)
      assert.ok(record)
      assert.equal(await service.storage.revokeToken(record.id), true)
      await sleep(1050)
      const response = await request('GET', `${service.url}/plants/1`, { token: doomed })
      assert.equal(response.status, 401)
      assert.match(response.json.message, /revoked/)
    })

    it('answers 403 with insufficient_scope when the scope is missing', async () => {
      const readOnly = await service.token(['plants:read'])
      const response = await request('POST', `${service.url}/plants`, {
        token: readOnly,
        body: { id: 7, name: 'x' },
      })
      assert.equal(response.status, 403)
      assert.equal(response.json.error, 403)
      assert.match(response.headers.get('www-authenticate') ?? '', /error="insufficient_scope"/)
      assert.match(response.json.message, /plants:write/)
      assert.equal((await request('GET', `${service.url}/plants/7`, { token })).status, 404)
      const writeOnly = await service.token(['plants:write'])
      assert.equal((await request('GET', `${service.url}/plants/7`, { token: writeOnly })).status, 403)
      assert.equal((await request('GET', `${service.url}/plants`, { token: writeOnly })).status, 403)
      assert.equal((await request('DELETE', `${service.url}/plants/7`, { token: readOnly })).status, 403)
    })

    it('checks the token before the body: bad body and bad token is 401, not 400 or 415', async () => {
      for (const body of ['{not json', '[]', '']) {
        const response = await request('POST', `${service.url}/plants`, { body, contentType: 'text/plain' })
        assert.equal(response.status, 401)
      }
      const big = await request('POST', `${service.url}/plants`, { body: 'x'.repeat(64 * 1024) })
      assert.equal(big.status, 401)
    })

    it('leaves the public endpoints open', async () => {
      for (const path of ['/healthz', '/readyz', '/openapi.json']) {
        assert.equal((await request('GET', `${service.url}${path}`)).status, 200, path)
      }
    })
  })
}
