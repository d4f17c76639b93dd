import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import { startService, type TestService, testStores } from '../helpers.js'
import { rawRequest, request } from '../http-client.js'

/** The rel="next" target of a GitHub-style Link header, or undefined on the last page. */
function nextUrl(link: string | null): string | undefined {
  return link ? /<([^<>]+)>;\s*rel="next"/.exec(link)?.[1] : undefined
}

for (const store of testStores()) {
  describe(`GET /plants and DELETE /plants/{id} (${store})`, () => {
    let service: TestService
    let token: string
    const ids = [
      -9223372036854775808n,
      -5n,
      0n,
      7n,
      9007199254740993n,
      ...Array.from({ length: 240 }, (_, i) => 1000n + BigInt(i)),
      9223372036854775807n,
    ].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    const list = (query: string, t = token) => request('GET', `${service.url}/plants${query}`, { token: t })

    before(async () => {
      service = await startService(store)
      token = await service.token()
      // Inserted out of order on purpose: the listing must sort by id, not by arrival.
      for (const id of [...ids].reverse()) {
        const tag = id % 3n === 0n ? 'even-third' : undefined
        const body = tag ? `{"id":${id},"name":"p${id}","tag":"${tag}"}` : `{"id":${id},"name":"p${id}"}`
        const response = await request('POST', `${service.url}/plants`, { token, body })
        assert.equal(response.status, 200)
      }
    })
    after(() => service.close())

    it('lists 100 by default, ordered by id, ids exact, with a next link', async () => {
      const response = await list('')
      assert.equal(response.status, 200)
      assert.match(response.text, /^\[\{"id":-9223372036854775808,"name":"p-9223372036854775808"\}/)
      const page = JSON.parse(response.text.replace(/"id":(-?\d+)/g, '"id":"$1"'))
      assert.equal(page.length, 100)
      assert.deepEqual(
        page.map((p: { id: string }) => BigInt(p.id)),
        ids.slice(0, 100),
      )
      assert.ok(nextUrl(response.headers.get('link')))
    })

    it('pages through everything with after and Link, missing and repeating nothing', async () => {
      const seen: bigint[] = []
      let url: string | undefined = `${service.url}/plants?limit=37`
      let pages = 0
      while (url) {
        const response = await request('GET', url, { token })
        assert.equal(response.status, 200)
        for (const match of response.text.matchAll(/"id":(-?\d+)/g)) seen.push(BigInt(match[1] as string))
        url = nextUrl(response.headers.get('link'))
        pages++
        assert.ok(pages < 20)
      }
      assert.deepEqual(seen, ids)
      assert.equal(pages, Math.ceil(ids.length / 37))
    })

    it('builds Link from X-Forwarded-Proto and -Host only when TRUST_PROXY trusts the sender', async () => {
      const forwarded = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'shop.example:8443' }
      const direct = await request('GET', `${service.url}/plants?limit=1`, { token, headers: forwarded })
      assert.equal(
        nextUrl(direct.headers.get('link'))?.startsWith(`${service.url}/plants?limit=1&after=`),
        true,
      )
      for (const [trust, expected] of [
        ['127.0.0.1', 'https://shop.example:8443/plants?limit=1&after='],
        ['10.0.0.0/8', `${service.url}/plants?limit=1&after=`],
      ] as const) {
        // Store-independent, so on a SQLite file of its own: this suite's store keeps its plant count.
        const behind = await startService('sqlite', { TRUST_PROXY: trust })
        try {
          const behindToken = await behind.token()
          await request('POST', `${behind.url}/plants`, { token: behindToken, body: { id: 1, name: 'a' } })
          await request('POST', `${behind.url}/plants`, { token: behindToken, body: { id: 2, name: 'b' } })
          const page = await request('GET', `${behind.url}/plants?limit=1`, {
            token: behindToken,
            headers: forwarded,
          })
          const link = nextUrl(page.headers.get('link')) ?? ''
          assert.ok(link.startsWith(expected.replace(service.url, behind.url)), `${trust}: ${link}`)
        } finally {
          await behind.close()
        }
      }
    })

    it('makes Link relative when the origin is missing (HTTP/1.0) or a forwarded one is not a plain host', async () => {
      const exchange = (bytes: string) =>
        new Promise<string>((resolve, reject) => {
          const socket = net.connect(Number(new URL(service.url).port), '127.0.0.1', () =>
            socket.write(bytes),
          )
          let received = ''
          socket.on('data', (chunk) => (received += chunk))
          socket.on('error', reject)
          socket.on('close', () => resolve(received))
        })
      const old = await exchange(`GET /plants?limit=1 HTTP/1.0\r\nAuthorization: Bearer ${token}\r\n\r\n`)
      assert.match(old, /^HTTP\/1\.1 200 /)
      assert.match(old, /\r\nlink: <\/plants\?limit=1&after=-?\d+>; rel="next"\r\n/i)
      const behind = await startService('sqlite', { TRUST_PROXY: '127.0.0.1' })
      try {
        const behindToken = await behind.token()
        for (const id of [1, 2]) {
          await request('POST', `${behind.url}/plants`, { token: behindToken, body: { id, name: 'a' } })
        }
        for (const headers of <Record<string, string>[]>[
          { 'x-forwarded-host': 'x>; rel="prev", <http://elsewhere' },
          { 'x-forwarded-proto': 'javascript', 'x-forwarded-host': 'shop.example' },
        ]) {
          const page = await request('GET', `${behind.url}/plants?limit=1`, { token: behindToken, headers })
          assert.equal(
            page.headers.get('link'),
            '</plants?limit=1&after=1>; rel="next"',
            JSON.stringify(headers),
          )
        }
      } finally {
        await behind.close()
      }
    })

    it('sends no Link on the last page, even when it is exactly full', async () => {
      const response = await list(`?limit=2&after=${ids.at(-3)}`)
      assert.equal(response.status, 200)
      assert.equal(response.json.length, 2)
      assert.equal(response.headers.get('link'), null)
    })

    it('puts an absolute next URL carrying limit, after and tag', async () => {
      const response = await list('?limit=5&tag=even-third')
      const next = new URL(nextUrl(response.headers.get('link')) as string)
      assert.equal(next.origin, service.url)
      assert.equal(next.pathname, '/plants')
      assert.equal(next.searchParams.get('limit'), '5')
      assert.equal(next.searchParams.get('tag'), 'even-third')
      assert.ok(next.searchParams.get('after'))
    })

    it('filters by tag across pages', async () => {
      const expected = ids.filter((id) => id % 3n === 0n)
      const seen: bigint[] = []
      let url: string | undefined = `${service.url}/plants?tag=even-third&limit=10`
      while (url) {
        const response = await request('GET', url, { token })
        for (const plant of response.json) assert.equal(plant.tag, 'even-third')
        for (const match of response.text.matchAll(/"id":(-?\d+)/g)) seen.push(BigInt(match[1] as string))
        url = nextUrl(response.headers.get('link'))
      }
      assert.deepEqual(seen, expected)
      assert.deepEqual((await list('?tag=nothing-has-this')).json, [])
    })

    it('accepts after at the int64 edges', async () => {
      assert.deepEqual((await list('?after=9223372036854775807')).json, [])
      const first = await list('?after=-9223372036854775808&limit=1')
      assert.match(first.text, /^\[\{"id":-5,/)
      const exact = await list('?after=9007199254740992&limit=1')
      assert.match(exact.text, /"id":9007199254740993/)
    })

    it('reads after written with leading zeros, however many', async () => {
      const plain = await list('?after=9007199254740992&limit=1')
      const padded = await list(`?after=${'0'.repeat(40)}9007199254740992&limit=1`)
      assert.equal(padded.status, 200, padded.text)
      assert.equal(padded.text, plain.text)
    })

    it('accepts limit 1 and 1000, leading zeros or not', async () => {
      assert.equal((await list('?limit=1')).json.length, 1)
      assert.equal((await list('?limit=1000')).json.length, ids.length)
      assert.equal((await list('?limit=00005')).json.length, 5)
      assert.equal((await list('?limit=0000001000')).json.length, ids.length)
    })

    for (const name of ['limit', 'after', 'tag']) {
      it(`answers 400 naming ${name} when it is given twice`, async () => {
        const response = await list(`?${name}=1&${name}=2`)
        assert.equal(response.status, 400)
        assert.equal(response.json.message, `query parameter ${name} must be given at most once`)
      })
    }

    for (const query of ['?tag=%ff', '?tag=%ED%A0%80', '?tag=%', '?limit=2&tag=a%2']) {
      it(`answers 400 for bad percent-encoding in the query: ${query}`, async () => {
        const response = await list(query)
        assert.equal(response.status, 400)
        assert.match(response.json.message, /^query parameter tag has bad percent-encoding/)
        assert.deepEqual(response.json.details, [
          { field: 'tag', rule: 'must be valid percent-encoded UTF-8' },
        ])
      })
    }

    for (const query of [
      '?limit=0',
      '?limit=1001',
      '?limit=abc',
      '?limit=1.5',
      '?limit=-1',
      '?limit=',
      '?limit=Infinity',
      '?limit=0x10',
      '?limit=0b11',
      '?limit=1e2',
      '?limit=2.0',
      '?limit=+5',
      '?limit=%205',
      '?limit=3%20',
      '?limit=%0A3',
      '?limit=00000',
      '?limit=%ff',
    ]) {
      it(`answers 400 naming limit for ${query}`, async () => {
        const response = await list(query)
        assert.equal(response.status, 400)
        assert.match(response.json.message, /\blimit\b/)
      })
    }

    for (const query of [
      '?after=abc',
      '?after=9223372036854775808',
      '?after=1.5',
      '?after=1e3',
      '?after=Infinity',
      '?after=1e400',
    ]) {
      it(`answers 400 naming after for ${query}`, async () => {
        const response = await list(query)
        assert.equal(response.status, 400)
        assert.match(response.json.message, /\bafter\b/)
      })
    }

    it('answers 400 naming tag for an empty or too long tag', async () => {
      assert.match((await list('?tag=')).json.message, /\btag\b/)
      assert.equal((await list(`?tag=${'t'.repeat(101)}`)).status, 400)
    })

    it('deletes with 204 and no body, then 404, and the id can be created again', async () => {
      const removed = await request('DELETE', `${service.url}/plants/7`, { token })
      assert.equal(removed.status, 204)
      assert.equal(removed.text, '')
      assert.equal((await request('GET', `${service.url}/plants/7`, { token })).status, 404)
      assert.equal((await request('DELETE', `${service.url}/plants/7`, { token })).status, 404)
      const again = await request('POST', `${service.url}/plants`, {
        token,
        body: { id: 7, name: 'reborn', tag: 'new' },
      })
      assert.equal(again.status, 200)
      assert.deepEqual((await request('GET', `${service.url}/plants/7`, { token })).json, {
        id: 7,
        name: 'reborn',
        tag: 'new',
      })
    })

    it('deletes the int64 extremes exactly', async () => {
      assert.equal(
        (await request('DELETE', `${service.url}/plants/9223372036854775807`, { token })).status,
        204,
      )
      assert.equal((await request('GET', `${service.url}/plants/9223372036854775806`, { token })).status, 404)
      assert.equal(
        (await request('DELETE', `${service.url}/plants/-9223372036854775808`, { token })).status,
        204,
      )
      assert.equal((await request('DELETE', `${service.url}/plants/abc`, { token })).status, 400)
      assert.equal(
        (await request('DELETE', `${service.url}/plants/9223372036854775808`, { token })).status,
        400,
      )
    })

    it('ignores a body sent with DELETE, whatever its type or size', async () => {
      const auth = { authorization: `Bearer ${token}` }
      const bodies: [Record<string, string>, string][] = [
        [{ 'content-type': 'text/plain' }, 'x'],
        [{ 'content-type': 'application/json' }, '{bad'],
        [{ 'content-type': 'application/json' }, ''],
        [{ 'content-type': 'application/json' }, JSON.stringify({ pad: 'p'.repeat(20_000) })],
      ]
      for (const [headers, body] of bodies) {
        await request('POST', `${service.url}/plants`, { token, body: { id: 8101, name: 'doomed' } })
        const deleted = await rawRequest(
          `${service.url}/plants/8101`,
          'DELETE',
          { ...auth, ...headers },
          body,
        )
        assert.equal(deleted.status, 204, `${JSON.stringify(headers)}: ${deleted.text}`)
        assert.equal((await request('GET', `${service.url}/plants/8101`, { token })).status, 404)
      }
      const absent = await rawRequest(
        `${service.url}/plants/8101`,
        'DELETE',
        { ...auth, 'content-type': 'text/plain' },
        'x',
      )
      assert.equal(absent.status, 404)
    })

    it('needs plants:read to list and plants:write to delete', async () => {
      const writer = await service.token(['plants:write'])
      const reader = await service.token(['plants:read'])
      assert.equal((await list('', writer)).status, 403)
      assert.equal((await request('DELETE', `${service.url}/plants/0`, { token: reader })).status, 403)
      assert.equal((await request('GET', `${service.url}/plants/0`, { token: reader })).status, 200)
      assert.equal((await list('')).status, 200)
      assert.equal((await request('GET', `${service.url}/plants`)).status, 401)
    })
  })
}
