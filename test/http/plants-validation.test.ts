import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { gzipSync } from 'node:zlib'
import { startService, type TestService, testStores } from '../helpers.js'
import { rawRequest, request } from '../http-client.js'

for (const store of testStores()) {
  describe(`POST /plants rejects bad input (${store})`, () => {
    let service: TestService
    let token: string
    const post = (body: unknown, options: { contentType?: string | null } = {}) =>
      request('POST', `${service.url}/plants`, { token, body, ...options })

    before(async () => {
      service = await startService(store)
      token = await service.token()
    })
    after(() => service.close())

    const cases: [string, unknown, RegExp][] = [
      ['a missing id', { name: 'x' }, /\bid\b.*required/],
      ['a missing name', { id: 1 }, /\bname\b.*required/],
      ['a string id', { id: '1', name: 'x' }, /\bid\b/],
      ['a fractional id', { id: 1.5, name: 'x' }, /\bid\b/],
      ['a null id', { id: null, name: 'x' }, /\bid\b/],
      ['a boolean id', { id: true, name: 'x' }, /\bid\b/],
      ['a numeric name', { id: 1, name: 5 }, /\bname\b/],
      ['an empty name', { id: 1, name: '' }, /\bname\b/],
      ['a 201-character name', { id: 1, name: 'n'.repeat(201) }, /\bname\b.*200/],
      ['a null tag', { id: 1, name: 'x', tag: null }, /\btag\b/],
      ['an empty tag', { id: 1, name: 'x', tag: '' }, /\btag\b/],
      ['a 101-character tag', { id: 1, name: 'x', tag: 't'.repeat(101) }, /\btag\b.*100/],
      ['an array tag', { id: 1, name: 'x', tag: ['a'] }, /\btag\b/],
      ['an array body', '[{"id":1,"name":"x"}]', /object/],
      ['a string body', '"plant"', /object/],
      ['a null body', 'null', /object/],
      ['a number body', '42', /object/],
      ['malformed JSON', '{"id":1,"name":', /JSON/],
      ['trailing garbage', '{"id":1,"name":"x"} extra', /JSON/],
      ['an empty body', '', /empty/],
      ['a NUL in the name', '{"id":1,"name":"a\\u0000b"}', /\bname\b.*NUL/],
      ['a lone surrogate in the name', '{"id":1,"name":"\\ud800"}', /\bname\b.*Unicode/],
      ['a lone surrogate in the tag', '{"id":1,"name":"x","tag":"\\udc00x"}', /\btag\b.*Unicode/],
      [
        'a __proto__ key',
        '{"id":1,"name":"x","__proto__":{"admin":true}}',
        /^body must not contain "__proto__"/,
      ],
      [
        'a constructor.prototype key',
        '{"id":1,"name":"x","constructor":{"prototype":{"a":1}}}',
        /"constructor\.prototype" keys$/,
      ],
    ]
    for (const [label, body, message] of cases) {
      it(`answers 400 for ${label}, naming the problem, and stores nothing`, async () => {
        const response = await post(body)
        assert.equal(response.status, 400, response.text)
        assert.equal(response.json.error, 400)
        assert.equal(typeof response.json.message, 'string')
        assert.match(response.json.message, message)
        assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
        assert.equal((await request('GET', `${service.url}/plants/1`, { token })).status, 404)
        // Valid JSON with a forbidden key breaks a rule; it is not malformed.
        if (/proto/.test(label)) {
          assert.equal(response.json.code, 'VALIDATION_FAILED')
          assert.deepEqual(
            response.json.details.map((d: { field: string }) => d.field),
            ['body'],
          )
        }
      })
    }

    it('lists every field at fault in details, and names the first in the message', async () => {
      const both = await post({ id: 'x', name: 5, tag: '' })
      assert.equal(both.status, 400)
      // NewPlant is Plant's fields, then id (openapi.test.ts): the details come in that order.
      assert.equal(both.json.message, 'name must be a string')
      assert.deepEqual(both.json.details, [
        { field: 'name', rule: 'must be a string' },
        { field: 'tag', rule: 'must NOT have fewer than 1 characters' },
        { field: 'id', rule: 'must be an integer' },
      ])
      const empty = await post({})
      assert.deepEqual(empty.json.details, [
        { field: 'name', rule: 'is required' },
        { field: 'id', rule: 'is required' },
      ])
      const query = await request('GET', `${service.url}/plants?limit=0&after=x`, { token })
      assert.deepEqual(
        query.json.details.map((detail: { field: string }) => detail.field),
        ['limit', 'after'],
      )
    })

    it('says "must be an integer" for a fractional id and a path id of letters, as its own checks do', async () => {
      assert.equal((await post('{"id":1.5,"name":"x"}')).json.message, 'id must be an integer')
      const read = await request('GET', `${service.url}/plants/abc`, { token })
      assert.equal(read.json.message, 'path parameter id must be an integer')
    })

    it('answers 415 for a missing Content-Type', async () => {
      const response = await rawRequest(
        `${service.url}/plants`,
        'POST',
        { authorization: `Bearer ${token}` },
        '{"id":1,"name":"x"}',
      )
      assert.equal(response.status, 415)
      assert.match(JSON.parse(response.text).message, /Content-Type/)
    })

    it('answers 415 for a missing Content-Type and no body', async () => {
      const response = await request('POST', `${service.url}/plants`, { token })
      assert.equal(response.status, 415)
    })

    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/xml',
      'application/json; charset=latin1',
    ]) {
      it(`answers 415 for Content-Type ${type}`, async () => {
        const response = await post('{"id":1,"name":"x"}', { contentType: type })
        assert.equal(response.status, 415)
        assert.equal(response.json.error, 415)
      })
    }

    it('answers 415 for a Content-Encoding other than identity, gzip or not, and stores nothing', async () => {
      const json = '{"id":4150,"name":"Coded"}'
      for (const [coding, body] of [
        ['gzip', gzipSync(json)],
        ['gzip', json],
        ['br', json],
      ] as const) {
        const response = await rawRequest(
          `${service.url}/plants`,
          'POST',
          {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            'content-encoding': coding,
          },
          body,
        )
        assert.equal(response.status, 415, coding)
        assert.equal(
          JSON.parse(response.text).message,
          `Content-Encoding ${coding} is not supported: send the body uncompressed`,
        )
      }
      assert.equal((await request('GET', `${service.url}/plants/4150`, { token })).status, 404)
      const identity = await rawRequest(
        `${service.url}/plants`,
        'POST',
        {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-encoding': 'identity',
        },
        json,
      )
      assert.equal(identity.status, 200, identity.text)
      const unauthenticated = await rawRequest(
        `${service.url}/plants`,
        'POST',
        { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        json,
      )
      assert.equal(unauthenticated.status, 401, 'the token is checked first')
    })

    it('answers 413 for a body over the 16 KiB default limit', async () => {
      const response = await post({ id: 1, name: 'x', padding: 'p'.repeat(17 * 1024) })
      assert.equal(response.status, 413)
      assert.equal(response.json.error, 413)
      assert.match(response.json.message, /16384/)
    })

    it('answers 4xx to 100,000 nested brackets and keeps serving', async () => {
      const response = await post(`{"id":1,"name":"x","tag":${'['.repeat(100_000)}${']'.repeat(100_000)}}`)
      assert.ok(response.status >= 400 && response.status < 500, String(response.status))
      assert.equal((await request('GET', `${service.url}/healthz`)).status, 200)
    })

    it('answers 400 to deep nesting within the size limit, stores nothing and keeps serving', async () => {
      for (const [id, field] of [
        ['7101', 'extra'],
        ['7102', 'tag'],
        ['9007199254741001', 'extra'], // the lossless re-parse path
        ['7103.5e1', 'extra'],
      ]) {
        const response = await post(
          `{"id":${id},"name":"x","${field}":${'['.repeat(5000)}${']'.repeat(5000)}}`,
        )
        assert.equal(response.status, 400, response.text)
        assert.match(response.json.message, /nested too deeply: at most 64 levels/)
      }
      for (const id of ['7101', '7102', '9007199254741001', '71035']) {
        assert.equal((await request('GET', `${service.url}/plants/${id}`, { token })).status, 404)
      }
      assert.equal((await request('GET', `${service.url}/healthz`)).status, 200)
    })

    it('takes an unknown property nested 64 levels deep, and refuses 65', async () => {
      const nest = (levels: number) => `${'['.repeat(levels - 1)}{"s":"[[[["}${']'.repeat(levels - 1)}`
      const ok = await post(`{"id":7104,"name":"x","extra":${nest(63)}}`)
      assert.equal(ok.status, 200, ok.text)
      const deep = await post(`{"id":7105,"name":"x","extra":${nest(64)}}`)
      assert.equal(deep.status, 400, deep.text)
      assert.equal((await request('GET', `${service.url}/plants/7105`, { token })).status, 404)
    })

    it('answers 400 to 100,000 nested brackets under a 1 MiB BODY_LIMIT', async () => {
      // On the same database: a reset would take the suite's token away from the first service.
      const big = await startService(store, { BODY_LIMIT: '1048576', KEEP_DATABASE: '1' })
      try {
        const bigToken = await big.token()
        const response = await request('POST', `${big.url}/plants`, {
          token: bigToken,
          body: `{"id":7106,"name":"x","extra":${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
        })
        assert.equal(response.status, 400, response.text)
        assert.match(response.json.message, /nested too deeply/)
        assert.equal((await request('GET', `${big.url}/plants/7106`, { token: bigToken })).status, 404)
      } finally {
        await big.close()
      }
    })

    it('answers 400 to a body that is not valid UTF-8, storing nothing', async () => {
      const body = Buffer.concat([
        Buffer.from('{"id":7107,"name":"a'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('"}'),
      ])
      const response = await rawRequest(
        `${service.url}/plants`,
        'POST',
        { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body,
      )
      assert.equal(response.status, 400, response.text)
      assert.deepEqual(JSON.parse(response.text), {
        error: 400,
        message: 'body is not valid UTF-8',
        code: 'MALFORMED_JSON',
      })
      assert.equal((await request('GET', `${service.url}/plants/7107`, { token })).status, 404)
      const replacement = await post('{"id":7108,"name":"a\ufffd"}')
      assert.equal(replacement.status, 200, 'a real U+FFFD is valid text')
    })

    it('says what is wrong with malformed JSON without quoting the body back', async () => {
      for (const [body, message] of [
        ['{"id":+1,"name":"echo me"}', 'body is not valid JSON: unexpected character at line 1, column 7'],
        [`[${'1,'.repeat(50)}]`, 'body is not valid JSON: expected a value at line 1, column 102'],
        ['{"id":1,"name":"x"} trailing', 'body is not valid JSON: unexpected character at line 1, column 21'],
        [
          '{"id":1,\n "name":"x",\n}',
          'body is not valid JSON: expected a property name in double quotes at line 3, column 1',
        ],
        [
          '{"id":1,"name":"a\u0001"}',
          'body is not valid JSON: control character in a string must be escaped at line 1, column 16',
        ],
      ]) {
        const response = await post(body as string)
        assert.equal(response.status, 400, body)
        assert.deepEqual(response.json, { error: 400, message, code: 'MALFORMED_JSON' }, body)
      }
    })

    it('answers 413 to a huge string and keeps serving', async () => {
      const response = await post({ id: 1, name: 'x'.repeat(1024 * 1024) })
      assert.equal(response.status, 413)
      assert.equal((await request('GET', `${service.url}/healthz`)).status, 200)
    })

    it('does not pollute prototypes through the body', async () => {
      await post('{"id":5,"name":"x","__proto__":{"polluted":true}}')
      assert.equal(({} as Record<string, unknown>).polluted, undefined)
    })

    it('honours BODY_LIMIT', async () => {
      const small = await startService(store, { BODY_LIMIT: '100', KEEP_DATABASE: '1' })
      try {
        const smallToken = await small.token()
        const response = await request('POST', `${small.url}/plants`, {
          token: smallToken,
          body: { id: 1, name: 'n'.repeat(150) },
        })
        assert.equal(response.status, 413)
        assert.match(response.json.message, /100 bytes/)
      } finally {
        await small.close()
      }
    })
  })
}
