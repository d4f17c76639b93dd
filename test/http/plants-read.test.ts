import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { postgresHint, skipUnless, startService, type TestService, testStores } from '../helpers.js'
import { pgAdmin } from '../pg-admin.js'
import { request } from '../http-client.js'

for (const store of testStores()) {
  describe(`GET /plants/{id} (${store})`, () => {
    let service: TestService
    let token: string
    before(async () => {
      service = await startService(store)
      token = await service.token()
      await request('POST', `${service.url}/plants`, { token, body: { id: 5, name: 'Rose', tag: 'flower' } })
    })
    after(() => service.close())

    it('answers 200 with id, name and tag', async () => {
      const response = await request('GET', `${service.url}/plants/5`, { token })
      assert.equal(response.status, 200)
      assert.equal(response.text, '{"id":5,"name":"Rose","tag":"flower"}')
    })

    it('answers 404 with the Error shape for an absent id', async () => {
      const response = await request('GET', `${service.url}/plants/6`, { token })
      assert.equal(response.status, 404)
      assert.deepEqual(Object.keys(response.json).sort(), ['code', 'error', 'message'])
      assert.equal(response.json.error, 404)
      assert.match(response.json.message, /\b6\b/)
    })

    for (const id of [
      'abc',
      '1.5',
      '9223372036854775808',
      '-9223372036854775809',
      '1e3',
      '%20',
      '0x10',
      '+5',
    ]) {
      it(`answers 400 naming id for ${id}`, async () => {
        const response = await request('GET', `${service.url}/plants/${id}`, { token })
        assert.equal(response.status, 400, response.text)
        assert.match(response.json.message, /\bid\b/)
      })
    }

    it('reads an id written with leading zeros, up to 100 characters in all', async () => {
      for (const path of ['005', `${'0'.repeat(30)}5`, `${'0'.repeat(99)}5`]) {
        const response = await request('GET', `${service.url}/plants/${path}`, { token })
        assert.equal(response.text, '{"id":5,"name":"Rose","tag":"flower"}', path)
      }
      const min = await request('GET', `${service.url}/plants/-${'0'.repeat(10)}9223372036854775808`, {
        token,
      })
      assert.equal(min.status, 404, 'int64 min with leading zeros is an id, of no plant')
    })

    it('names id for bad percent-encoding in it, on GET and DELETE', async () => {
      for (const method of ['GET', 'DELETE'] as const) {
        const response = await request(method, `${service.url}/plants/980%ff`, { token })
        assert.equal(response.status, 400)
        assert.match(response.json.message, /^path parameter id has bad percent-encoding/)
        assert.deepEqual(response.json.details, [
          { field: 'id', rule: 'must be valid percent-encoded UTF-8' },
        ])
      }
    })

    it('answers 400 in the Error shape for an over-long id and malformed percent-encoding', async () => {
      for (const path of [`/plants/${'1'.repeat(150)}`, `/plants/${'0'.repeat(100)}5`, '/plants/%zz']) {
        const response = await request('GET', `${service.url}${path}`, { token })
        assert.equal(response.status, 400, path)
        assert.equal(response.json.error, 400)
        assert.equal(typeof response.json.message, 'string')
      }
      const long = await request('GET', `${service.url}/plants/${'1'.repeat(150)}`, { token })
      assert.match(long.json.message, /^path parameter id is too long/)
      assert.deepEqual(long.json.details, [{ field: 'id', rule: 'has at most 100 characters' }])
    })

    it('answers 400 naming tag for a NUL in the tag filter', async () => {
      const response = await request('GET', `${service.url}/plants?tag=a%00b`, { token })
      assert.equal(response.status, 400)
      assert.match(response.json.message, /\btag\b/)
    })

    it('answers HEAD like GET without a body', async () => {
      const response = await request('HEAD', `${service.url}/plants/5`, { token })
      assert.equal(response.status, 200)
      assert.equal(response.text, '')
    })
  })
}

const withPostgres = skipUnless(testStores().includes('postgres'), 'TEST_DATABASE_URL', postgresHint)
describe('a statement timeout on PostgreSQL', { skip: withPostgres }, () => {
  it('answers 503 with Retry-After, not a 500, while a lock holds a statement past DB_STATEMENT_TIMEOUT_MS', async () => {
    const service = await startService('postgres', { DB_STATEMENT_TIMEOUT_MS: '300' })
    const locker = pgAdmin(service.env.DATABASE_URL as string)
    try {
      const token = await service.token()
      await request('POST', `${service.url}/plants`, { token, body: { id: 9, name: 'Locked' } })
      let release = () => {}
      const held = new Promise<void>((resolve) => (release = resolve))
      let locked = () => {}
      const isLocked = new Promise<void>((resolve) => (locked = resolve))
      const sql = await locker.reserve()
      const transaction = (async () => {
        await sql`BEGIN`
        await sql`LOCK TABLE plants IN ACCESS EXCLUSIVE MODE`
        locked()
        await held
        await sql`COMMIT`
        sql.release()
      })()
      await isLocked
      const read = await request('GET', `${service.url}/plants/9`, { token })
      const list = await request('GET', `${service.url}/plants?limit=5`, { token })
      const create = await request('POST', `${service.url}/plants`, {
        token,
        body: { id: 10, name: 'Waits' },
      })
      release()
      await transaction
      for (const response of [read, list, create]) {
        assert.equal(response.status, 503, response.text)
        assert.equal(response.json.error, 503)
        assert.equal(response.json.code, 'STORE_UNAVAILABLE')
        assert.equal(response.headers.get('retry-after'), '5')
      }
      assert.equal((await request('GET', `${service.url}/plants/9`, { token })).status, 200)
    } finally {
      await locker.end()
      await service.close()
    }
  })
})
