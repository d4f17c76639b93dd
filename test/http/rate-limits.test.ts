import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { onRefusal, type RefusalKind } from '../../src/http/refusals.js'
import { startService, type TestService } from '../helpers.js'
import { type ApiResponse, request } from '../http-client.js'

function assertTooMany(answer: ApiResponse, limit: number): void {
  assert.equal(answer.status, 429)
  assert.equal(answer.json.error, 429)
  assert.equal(answer.json.code, 'TOO_MANY_REQUESTS')
  assert.match(answer.json.message, new RegExp(`more than ${limit} `))
  const retryAfter = Number(answer.headers.get('retry-after'))
  assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`)
  assert.equal(answer.headers.get('ratelimit-limit'), String(limit))
  assert.equal(answer.headers.get('ratelimit-remaining'), '0')
  assert.equal(answer.headers.get('ratelimit-reset'), String(retryAfter))
}

describe('rate limits: failed authentication per address (on by default), requests per token (opt-in)', () => {
  const refusals: RefusalKind[] = []
  const unsubscribe = onRefusal((kind) => refusals.push(kind))
  after(unsubscribe)

  describe('with the defaults', () => {
    let service: TestService
    before(async () => {
      service = await startService('sqlite')
    })
    after(() => service.close())

    it('answers the 101st failed authentication in a minute 429 with Retry-After and RateLimit-*, yet serves a valid token', async () => {
      const token = await service.token()
      for (let i = 0; i < 100; i++) {
        const answer = await request('GET', `${service.url}/plants`, { token: `pst_wrong${i}` })
        assert.equal(answer.status, 401)
      }
      const before = refusals.length
      assertTooMany(await request('GET', `${service.url}/plants`, { token: 'pst_wrong' }), 100)
      assertTooMany(
        await request('POST', `${service.url}/plants/`.slice(0, -1), { body: { id: 1, name: 'x' } }),
        100,
      )
      assert.deepEqual(refusals.slice(before), ['auth-failures', 'auth-failures'])
      // A valid token is never refused for its address's failures, and requests per token are not limited.
      for (let i = 0; i < 150; i++) {
        assert.equal((await request('GET', `${service.url}/plants`, { token })).status, 200)
      }
    })
  })

  describe('with TOKEN_RATE_LIMIT=5', () => {
    let service: TestService
    before(async () => {
      service = await startService('sqlite', { TOKEN_RATE_LIMIT: '5', TOKEN_RATE_WINDOW_MS: '60000' })
    })
    after(() => service.close())

    it('answers the 6th request of a token in the window 429, while another token is served', async () => {
      const busy = await service.token()
      const other = await service.token()
      for (let i = 0; i < 5; i++)
        assert.equal((await request('GET', `${service.url}/plants`, { token: busy })).status, 200)
      assertTooMany(await request('GET', `${service.url}/plants/1`, { token: busy }), 5)
      assert.equal(refusals.at(-1), 'token-rate')
      assert.equal((await request('GET', `${service.url}/plants`, { token: other })).status, 200)
    })
  })
})
