import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { startService, type TestService, testStores } from '../helpers.js'
import { request } from '../http-client.js'

for (const store of testStores()) {
  describe(`POST /plants (${store})`, () => {
    let service: TestService
    let token: string
    const post = (body: unknown, options: { contentType?: string | null } = {}) =>
      request('POST', `${service.url}/plants`, { token, body, ...options })
    const read = (id: string | number | bigint) => request('GET', `${service.url}/plants/${id}`, { token })

    before(async () => {
      service = await startService(store)
      token = await service.token()
    })
    after(() => service.close())

    it('answers 200 with exactly the Plant shape: name and tag, no id', async () => {
      const response = await post({ id: 1, name: 'Monstera', tag: 'tropical' })
      assert.equal(response.status, 200)
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/)
      assert.deepEqual(response.json, { name: 'Monstera', tag: 'tropical' })
      assert.equal(response.text, '{"name":"Monstera","tag":"tropical"}')
    })

    it('omits tag when absent', async () => {
      const response = await post({ id: 2, name: 'Fern' })
      assert.equal(response.status, 200)
      assert.equal(response.text, '{"name":"Fern"}')
      assert.equal((await read(2)).text, '{"id":2,"name":"Fern"}')
    })

    it('accepts a charset=utf-8 parameter and unicode names', async () => {
      const response = await post(
        { id: 3, name: 'Fougère 🌿', tag: 'ptéridophyte' },
        { contentType: 'application/json; charset=utf-8' },
      )
      assert.equal(response.status, 200)
      assert.deepEqual((await read(3)).json, { id: 3, name: 'Fougère 🌿', tag: 'ptéridophyte' })
    })

    it('ignores unknown properties and never stores them', async () => {
      const response = await post({ id: 4, name: 'Cactus', color: 'green', nested: { a: 1 } })
      assert.equal(response.status, 200)
      assert.deepEqual(response.json, { name: 'Cactus' })
      assert.deepEqual((await read(4)).json, { id: 4, name: 'Cactus' })
    })

    for (const id of ['9007199254740993', '9223372036854775807', '-9223372036854775808', '0', '-1']) {
      it(`keeps id ${id} exact, digit for digit`, async () => {
        const response = await post(`{"id":${id},"name":"Exact ${id}"}`)
        assert.equal(response.status, 200, response.text)
        const stored = await read(id)
        assert.equal(stored.status, 200)
        assert.equal(stored.text, `{"id":${id},"name":"Exact ${id}"}`)
      })
    }

    it('keeps an exponent-form integer literal exact', async () => {
      const response = await post('{"id":9.007199254740995e15,"name":"Exponent"}')
      assert.equal(response.status, 200, response.text)
      assert.equal((await read('9007199254740995')).json.name, 'Exponent')
    })

    for (const id of [
      '9223372036854775808',
      '-9223372036854775809',
      '18446744073709551616',
      '1e30',
      '1e400',
      '-1e400',
      '1e309',
      '-1.5e99999999999999999999',
    ]) {
      it(`rejects id ${id} outside int64 with 400 naming id and the range`, async () => {
        const response = await post(`{"id":${id},"name":"Too big"}`)
        assert.equal(response.status, 400)
        assert.equal(response.json.error, 400)
        // Past the doubles' range too (JSON.parse reads Infinity): an integer out of range all the same.
        assert.equal(
          response.json.message,
          'id must be an integer from -9223372036854775808 to 9223372036854775807',
        )
      })
    }

    it('reads leading zeros of a literal as nothing, however large its exponent', async () => {
      // 0.(40 zeros)123e45 is 12300: its exponent alone is past int64, its value is not.
      const response = await post(`{"id":0.${'0'.repeat(40)}123e45,"name":"Zeros"}`)
      assert.equal(response.status, 200, response.text)
      assert.equal((await read('12300')).text, '{"id":12300,"name":"Zeros"}')
    })

    it('rejects a fractional id beyond 2^53 that doubles would round to an integer', async () => {
      const response = await post('{"id":9007199254740993.5,"name":"Half"}')
      assert.equal(response.status, 400)
      assert.match(response.json.message, /\bid\b.*integer/)
    })

    // JSON.parse reads these as whole numbers (300000, 1, 0, -0): only the literal shows the fraction.
    for (const [literal, rounded] of [
      ['300000.00000000001', '300000'],
      ['7001.0000000000001', '7001'],
      ['1e-400', '0'],
      ['-1e-400', '0'],
      ['3000000.000000000000000000001e0', '3000000'],
    ] as const) {
      it(`rejects the fractional id ${literal} that doubles round to ${rounded}, storing nothing`, async () => {
        const response = await post(`{"id":${literal},"name":"Fraction"}`)
        assert.equal(response.status, 400, response.text)
        assert.equal(response.json.error, 400)
        assert.match(response.json.message, /\bid\b.*integer/)
        const stored = await read(rounded)
        assert.ok(stored.status === 404 || stored.json.name !== 'Fraction', stored.text)
      })
    }

    // The id's digits are read back from the text only beyond 2^53; that must not make a body
    // JSON.parse accepts fail, nor pick a different id than JSON.parse would (the last duplicate).
    for (const [label, body, id] of [
      ['after a byte-order mark', '\uFEFF{"id":9007199254741203,"name":"Bom"}', '9007199254741203'],
      ['given twice (the last counts)', '{"id":8,"name":"Dup","id":9007199254740997}', '9007199254740997'],
      [
        'beside nested duplicate keys and a nested id',
        '{"id":9007199254740999,"name":"Nested","a":{"b":1,"b":2,"id":5,"c":[{"id":6}]}}',
        '9007199254740999',
      ],
      ['under an escaped key', '{"\\u0069d":9007199254741001,"name":"Escaped"}', '9007199254741001'],
      [
        'after a string of quotes and brackets',
        '{ "name" : "Q \\" { [ ] } ," , "id" : 9007199254741003 }',
        '9007199254741003',
      ],
    ] as const) {
      it(`keeps an id beyond 2^53 exact ${label}`, async () => {
        const response = await post(body)
        assert.equal(response.status, 200, response.text)
        const stored = await read(id)
        assert.equal(stored.status, 200, stored.text)
        assert.ok(stored.text.startsWith(`{"id":${id},"name":`), stored.text)
      })
    }

    it('stores only the last of duplicate ids when one is beyond 2^53', async () => {
      const response = await post('{"id":9007199254741005,"name":"First","id":11}')
      assert.equal(response.status, 200, response.text)
      assert.equal((await read('11')).json.name, 'First')
      assert.equal((await read('9007199254741005')).status, 404)
    })

    it('keeps a plain id exact when the name holds a dot or an exponent-like text', async () => {
      const response = await post('{"id":4242,"name":"St. John\'s wort 2e5","tag":"v1.2"}')
      assert.equal(response.status, 200, response.text)
      assert.equal((await read('4242')).text, '{"id":4242,"name":"St. John\'s wort 2e5","tag":"v1.2"}')
    })

    it('accepts integral fraction and exponent forms of an id exactly', async () => {
      const response = await post('{"id":4243.000,"name":"Whole"}')
      assert.equal(response.status, 200, response.text)
      assert.equal((await read('4243')).json.name, 'Whole')
      assert.equal((await post('{"id":42.44e2,"name":"Exp"}')).status, 200)
      assert.equal((await read('4244')).json.name, 'Exp')
    })

    it('replays the same id, name and tag with 200 and stores nothing new', async () => {
      const body = { id: 10, name: 'Aloe', tag: 'succulent' }
      assert.equal((await post(body)).status, 200)
      const replay = await post(body)
      assert.equal(replay.status, 200)
      assert.deepEqual(replay.json, { name: 'Aloe', tag: 'succulent' })
      const list = await request('GET', `${service.url}/plants?after=9&limit=2`, { token })
      assert.deepEqual(
        list.json.filter((p: { id: number }) => p.id === 10),
        [{ id: 10, name: 'Aloe', tag: 'succulent' }],
      )
    })

    for (const [label, body] of [
      ['a different name', { id: 20, name: 'Other', tag: 't' }],
      ['a different tag', { id: 20, name: 'Basil', tag: 'other' }],
      ['the tag removed', { id: 20, name: 'Basil' }],
    ] as const) {
      it(`answers 409 for the same id with ${label}, and changes nothing`, async () => {
        await post({ id: 20, name: 'Basil', tag: 't' })
        const response = await post(body)
        assert.equal(response.status, 409)
        assert.equal(response.json.error, 409)
        assert.match(response.json.message, /\b20\b/)
        assert.deepEqual((await read(20)).json, { id: 20, name: 'Basil', tag: 't' })
      })
    }

    it('answers 409 when a tag is added to a stored plant without one', async () => {
      await post({ id: 21, name: 'Mint' })
      const response = await post({ id: 21, name: 'Mint', tag: 'herb' })
      assert.equal(response.status, 409)
      assert.deepEqual((await read(21)).json, { id: 21, name: 'Mint' })
    })

    it('stores concurrent identical creates once and answers all with 200', async () => {
      const results = await Promise.all(
        Array.from({ length: 20 }, () => post({ id: 30, name: 'Ivy', tag: 'vine' })),
      )
      assert.deepEqual(
        results.map((r) => r.status),
        Array(20).fill(200),
      )
    })

    it('answers exactly one 200 among concurrent conflicting creates', async () => {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => post({ id: 31, name: `Name ${i}` })),
      )
      const statuses = results.map((r) => r.status)
      assert.equal(statuses.filter((s) => s === 200).length, 1)
      assert.equal(statuses.filter((s) => s === 409).length, 19)
      const winner = results.find((r) => r.status === 200)
      assert.deepEqual((await read(31)).json, { id: 31, name: winner?.json.name })
    })

    it('accepts names of 1 and 200 characters and tags of 1 and 100', async () => {
      assert.equal((await post({ id: 40, name: 'x', tag: 'y' })).status, 200)
      assert.equal((await post({ id: 41, name: 'n'.repeat(200), tag: 't'.repeat(100) })).status, 200)
      assert.equal((await post({ id: 42, name: '🌵'.repeat(200) })).status, 200)
    })
  })
}
