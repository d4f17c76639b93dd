/** Who may read GET /metrics on the API's port: a token with metrics:read, so many scrapes a window. */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { onRefusal, type RefusalKind } from '../../src/http/refusals.js'
import { startService, type TestService, testStores } from '../helpers.js'
import { request } from '../http-client.js'
import { Scrape } from '../metrics-scrape.js'

for (const store of testStores()) {
  describe(`GET /metrics needs the metrics:read scope and is rate-limited per token (${store})`, () => {
    const refusals: RefusalKind[] = []
    const unsubscribe = onRefusal((kind) => refusals.push(kind))
    let service: TestService
    before(async () => {
      service = await startService(store, { METRICS_RATE_LIMIT: '3', METRICS_RATE_WINDOW_MS: '60000' })
    })
    after(async () => {
      unsubscribe()
      await service.close()
    })

    it('refuses an anonymous scrape 401 and a token without the scope 403, in the Error shape', async () => {
      const anonymous = await request('GET', `${service.url}/metrics`)
      assert.equal(anonymous.status, 401)
      assert.equal(anonymous.json.error, 401)
      assert.equal(anonymous.json.code, 'UNAUTHENTICATED')
      assert.match(anonymous.headers.get('www-authenticate') ?? '', /^Bearer realm="plant-store"/)
      assert.doesNotMatch(anonymous.text, /nodejs_|process_max_fds|webhook/)

      const plantsOnly = await service.token(['plants:read', 'plants:write'])
      const lacking = await request('GET', `${service.url}/metrics`, { token: plantsOnly })
      assert.equal(lacking.status, 403)
      assert.equal(lacking.json.code, 'INSUFFICIENT_SCOPE')
      assert.equal(lacking.json.message, 'token lacks the scope "metrics:read" this operation needs')
      assert.match(lacking.headers.get('www-authenticate') ?? '', /scope="metrics:read"/)
      // metrics:read opens nothing else.
      const scraper = await service.token(['metrics:read'])
      assert.equal((await request('GET', `${service.url}/plants`, { token: scraper })).status, 403)
    })

    it('serves a token with metrics:read, and answers its 4th scrape in the window 429 with Retry-After', async () => {
      const scraper = await service.token(['metrics:read'])
      for (let i = 0; i < 3; i++) {
        const scrape = await Scrape.of(`${service.url}/metrics`, scraper)
        assert.ok(scrape.has('plant_store_webhook_deliveries_pending'))
      }
      const limited = await request('GET', `${service.url}/metrics`, { token: scraper })
      assert.equal(limited.status, 429)
      assert.equal(limited.json.error, 429)
      assert.equal(limited.json.code, 'TOO_MANY_REQUESTS')
      assert.match(
        limited.json.message,
        /^more than 3 scrapes of \/metrics with this token in 60 s; retry after \d+ s$/,
      )
      const retryAfter = Number(limited.headers.get('retry-after'))
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`)
      assert.equal(refusals.at(-1), 'scrapes')
      // Per token: another scraper is served.
      const other = await service.token(['metrics:read'])
      assert.ok((await Scrape.of(`${service.url}/metrics`, other)).has('plant_store_http_requests_total'))
    })
  })
}
