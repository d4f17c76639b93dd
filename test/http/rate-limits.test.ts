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

  describe('with AUTH_FAILURE_LIMIT=2, clients told apart by X-Forwarded-For', () => {
    /** One failed authentication from `client`'s address. */
    const fail = (service: TestService, client: string) =>
      request('GET', `${service.url}/plants`, { token: 'pst_wrong', headers: { 'x-forwarded-for': client } })
    /** `count` other addresses fail once each, eight at a time; their statuses. */
    async function othersFail(service: TestService, count: number): Promise<number[]> {
      const statuses: number[] = []
      for (let i = 0; i < count; i += 8) {
        const batch = Array.from({ length: Math.min(8, count - i) }, (_, j) => {
          const n = i + j
          return fail(service, `10.${n >> 16}.${(n >> 8) & 255}.${n & 255}`).then((a) => a.status)
        })
        statuses.push(...(await Promise.all(batch)))
      }
      return statuses
    }

    it('keeps an address at 429 while 6,000 other addresses fail (the default AUTH_FAILURE_CLIENTS)', async () => {
      const service = await startService('sqlite', { AUTH_FAILURE_LIMIT: '2', TRUST_PROXY: '127.0.0.1' })
      try {
        for (let i = 0; i < 2; i++) assert.equal((await fail(service, '203.0.113.7')).status, 401)
        assertTooMany(await fail(service, '203.0.113.7'), 2)
        const others = await othersFail(service, 6_000)
        assert.deepEqual(new Set(others), new Set([401]))
        assertTooMany(await fail(service, '203.0.113.7'), 2)
      } finally {
        await service.close()
      }
    })

    it('counts at most AUTH_FAILURE_CLIENTS addresses: past that a new one gets 429, and none is forgotten', async () => {
      const service = await startService('sqlite', {
        AUTH_FAILURE_LIMIT: '2',
        AUTH_FAILURE_CLIENTS: '100',
        TRUST_PROXY: '127.0.0.1',
      })
      try {
        for (let i = 0; i < 2; i++) assert.equal((await fail(service, '203.0.113.7')).status, 401)
        assertTooMany(await fail(service, '203.0.113.7'), 2)
        const others = await othersFail(service, 150)
        assert.equal(others.filter((status) => status === 401).length, 99, 'the other 99 places')
        assert.equal(others.filter((status) => status === 429).length, 51)
        const full = await fail(service, '198.51.100.1')
        assert.equal(full.status, 429)
        assert.match(
          full.json.message,
          /more than 100 client addresses \(AUTH_FAILURE_CLIENTS\) failed authentication in 60 s; retry after \d+ s/,
        )
        assert.ok(Number(full.headers.get('retry-after')) >= 1)
        assertTooMany(await fail(service, '203.0.113.7'), 2)
        // A valid token is served whatever the table holds.
        assert.equal(
          (await request('GET', `${service.url}/plants`, { token: await service.token() })).status,
          200,
        )
      } finally {
        await service.close()
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
