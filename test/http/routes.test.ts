import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { request, startService, type TestService, testStores } from '../helpers.js'

for (const store of testStores()) {
  describe(`routes, methods and probes (${store})`, () => {
    let service: TestService
    before(async () => {
      service = await startService(store)
    })
    after(() => service.close())

    it('answers 404 in the Error shape for an unknown route', async () => {
      const response = await request('GET', `${service.url}/nope`)
      assert.equal(response.status, 404)
      assert.equal(response.json.error, 404)
      assert.match(response.json.message, /\/nope/)
    })

    for (const [method, path, allow] of [
      ['PUT', '/plants', 'GET, POST, HEAD'],
      ['PATCH', '/plants', 'GET, POST, HEAD'],
      ['DELETE', '/plants', 'GET, POST, HEAD'],
      ['PUT', '/plants/1', 'GET, DELETE, HEAD'],
      ['POST', '/plants/1', 'GET, DELETE, HEAD'],
      ['POST', '/healthz', 'GET, HEAD'],
    ] as const) {
      it(`answers 405 with Allow for ${method} ${path}`, async () => {
        const response = await request(method, `${service.url}${path}`)
        assert.equal(response.status, 405)
        assert.equal(response.headers.get('allow'), allow)
        assert.equal(response.json.error, 405)
      })
    }

    it('serves /healthz and /readyz as JSON', async () => {
      const health = await request('GET', `${service.url}/healthz`)
      assert.deepEqual(health.json, { status: 'ok' })
      const ready = await request('GET', `${service.url}/readyz`)
      assert.deepEqual(ready.json, { status: 'ready', store })
    })

    it('returns the caller X-Request-Id, or makes one', async () => {
      const given = await request('GET', `${service.url}/healthz`, {
        headers: { 'x-request-id': 'trace-123' },
      })
      assert.equal(given.headers.get('x-request-id'), 'trace-123')
      const made = await request('GET', `${service.url}/healthz`)
      assert.match(made.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/)
      const unsafe = await request('GET', `${service.url}/healthz`, { headers: { 'x-request-id': 'a b\tc' } })
      assert.notEqual(unsafe.headers.get('x-request-id'), 'a b\tc')
    })
  })
}
