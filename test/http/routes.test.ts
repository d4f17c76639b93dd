import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import { startService, type TestService, testStores } from '../helpers.js'
import { rawRequest, request } from '../http-client.js'

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

    for (const method of ['TRACE', 'QUERY', 'PROPFIND', 'PURGE', 'LOCK', 'M-SEARCH', 'SEARCH', 'OPTIONS']) {
      it(`answers 405 with Allow for ${method} on /plants and /plants/1, not 404 or 400`, async () => {
        for (const [path, allow] of [
          ['/plants', 'GET, POST, HEAD'],
          ['/plants/1', 'GET, DELETE, HEAD'],
        ]) {
          const response = await rawRequest(`${service.url}${path}`, method, {})
          assert.equal(response.status, 405, `${method} ${path}: ${response.text}`)
          assert.equal(response.headers.allow, allow)
          assert.equal(JSON.parse(response.text).error, 405)
        }
      })
    }

    it('names the path in a 405 as the document writes it, not as the router does', async () => {
      const response = await rawRequest(`${service.url}/plants/5`, 'PUT', {})
      assert.equal(
        JSON.parse(response.text).message,
        'PUT is not allowed on /plants/{id}; use GET, DELETE, HEAD',
      )
    })

    // 405 comes before anything about the body: no route would read it.
    for (const [label, headers, body] of [
      ['a text/plain body', { 'content-type': 'text/plain' }, 'x'],
      ['malformed JSON', { 'content-type': 'application/json' }, '{bad'],
      [
        'a 20 KB JSON body',
        { 'content-type': 'application/json' },
        JSON.stringify({ pad: 'p'.repeat(20_000) }),
      ],
    ] as const) {
      it(`answers 405 to PUT and PATCH with ${label}, with or without a token`, async () => {
        for (const method of ['PUT', 'PATCH']) {
          for (const path of ['/plants', '/plants/1']) {
            const response = await rawRequest(`${service.url}${path}`, method, { ...headers }, body)
            assert.equal(response.status, 405, `${method} ${path}: ${response.text}`)
          }
        }
        const deleteList = await rawRequest(`${service.url}/plants`, 'DELETE', { ...headers }, body)
        assert.equal(deleteList.status, 405, deleteList.text)
        const postHealth = await rawRequest(`${service.url}/healthz`, 'POST', { ...headers }, body)
        assert.equal(postHealth.status, 405, postHealth.text)
      })
    }

    it('answers 404 for an unknown path whatever the method', async () => {
      for (const method of ['GET', 'PROPFIND', 'PUT']) {
        const response = await rawRequest(`${service.url}/nope`, method, {})
        assert.equal(response.status, 404, method)
        assert.equal(JSON.parse(response.text).error, 404)
      }
    })

    it('answers 404 for /plants/ whatever the method: it is no plant id, as /plants/1/ is none', async () => {
      const token = await service.token()
      for (const method of ['GET', 'HEAD', 'POST', 'DELETE', 'PUT', 'PROPFIND']) {
        const body = method === 'POST' ? '{"id":1,"name":"slash"}' : undefined
        const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
        const response = await rawRequest(`${service.url}/plants/`, method, headers, body)
        assert.equal(response.status, 404, method)
        if (method !== 'HEAD') assert.equal(JSON.parse(response.text).code, 'ROUTE_NOT_FOUND', method)
      }
      const connect = parseRaw(await rawExchange('CONNECT /plants/ HTTP/1.1\r\nHost: x\r\n\r\n'))
      assert.equal(connect.statusLine, 'HTTP/1.1 501 Not Implemented')
      assert.equal((await request('GET', `${service.url}/plants/1`, { token })).status, 404)
    })

    /** Writes raw bytes on a fresh connection; resolves with all the server sent before closing. */
    function rawExchange(bytes: string): Promise<string> {
      return new Promise((resolve, reject) => {
        const socket = net.connect(Number(new URL(service.url).port), '127.0.0.1', () => socket.write(bytes))
        let received = ''
        socket.on('data', (chunk) => (received += chunk))
        socket.on('error', reject)
        socket.on('close', () => resolve(received))
      })
    }

    for (const [label, bytes, status, pattern] of [
      [
        'an unknown method',
        'FOO /plants HTTP/1.1\r\nHost: x\r\n\r\n',
        400,
        /not valid HTTP\/1\.1: Invalid method/,
      ],
      [
        'a header line without a colon',
        'GET /plants HTTP/1.1\r\nHost: x\r\nBroken\r\n\r\n',
        400,
        /not valid HTTP/,
      ],
      [
        'Content-Length with Transfer-Encoding',
        'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
        400,
        /not valid HTTP/,
      ],
      [
        'a non-numeric Content-Length',
        'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
        400,
        /not valid HTTP/,
      ],
      [
        'an HTTP/1.1 request without Host',
        'GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n',
        400,
        /^Host header is required in HTTP\/1\.1$/,
      ],
      [
        'two Host lines',
        'GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n',
        400,
        /^Host header must be sent once$/,
      ],
      [
        'a Host that is not a host[:port]',
        'GET /healthz HTTP/1.1\r\nHost: x>; rel="prev", <http://elsewhere\r\nConnection: close\r\n\r\n',
        400,
        /^Host header must be a host name or address, with an optional port of 0-65535$/,
      ],
      [
        'two Authorization lines',
        'GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\nauthorization: Bearer b\r\nConnection: close\r\n\r\n',
        400,
        /^Authorization header must be sent once$/,
      ],
      [
        'two Content-Type lines',
        'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Type: text/plain\r\n' +
          'Content-Length: 2\r\nConnection: close\r\n\r\n{}',
        400,
        /^Content-Type header must be sent once$/,
      ],
      [
        'a Host whose port no connection could have',
        'GET /healthz HTTP/1.1\r\nHost: x:65536\r\nConnection: close\r\n\r\n',
        400,
        /^Host header must be a host name or address, with an optional port of 0-65535$/,
      ],
      [
        '20 KB of headers',
        `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
        431,
        /^request line and headers must not be larger than 16384 bytes/,
      ],
      [
        'a 20 KB request target',
        `GET /plants/${'1'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
        414,
        /^request line \(method, target, version\) must not be longer than 16384 bytes/,
      ],
    ] as const) {
      it(`answers ${label} with ${status} in the Error shape and closes`, async () => {
        const received = await rawExchange(bytes)
        assert.match(received, new RegExp(`^HTTP/1\\.1 ${status} `))
        assert.match(received, /\r\ncontent-type: application\/json; charset=utf-8\r\n/i)
        const body = JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4))
        assert.equal(body.error, status)
        assert.match(body.message, pattern)
        assert.equal(typeof body.code, 'string')
        assert.equal((await request('GET', `${service.url}/healthz`)).status, 200)
      })
    }

    it('answers a 20 KB request target pipelined behind a valid request 414, after that answer', async () => {
      const received = await rawExchange(
        `GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /plants?x=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
      )
      assert.match(received, /^HTTP\/1\.1 200 [^]*\r\n\r\n\{"status":"ok"\}HTTP\/1\.1 414 /)
    })

    it('takes a Host with the highest port a connection can have', async () => {
      const received = await rawExchange(
        'GET /healthz HTTP/1.1\r\nHost: x:65535\r\nConnection: close\r\n\r\n',
      )
      assert.match(received, /^HTTP\/1\.1 200 /)
    })

    /** Splits a raw HTTP/1.1 answer into its status, lower-cased headers and JSON body. */
    function parseRaw(received: string) {
      const end = received.indexOf('\r\n\r\n')
      const [statusLine = '', ...lines] = received.slice(0, end).split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of lines) {
        const colon = line.indexOf(':')
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
      }
      return { statusLine, headers, body: JSON.parse(received.slice(end + 4)) }
    }

    // Node hands CONNECT to the server's 'connect' event instead of a route (routes/connect.ts).
    for (const [target, allow, pattern] of [
      ['/plants', 'GET, POST, HEAD', /^CONNECT is not allowed on \/plants; use GET, POST, HEAD$/],
      [
        '/plants/7',
        'GET, DELETE, HEAD',
        /^CONNECT is not allowed on \/plants\/\{id\}; use GET, DELETE, HEAD$/,
      ],
      ['/plants?limit=5', 'GET, POST, HEAD', /^CONNECT is not allowed on \/plants; use GET, POST, HEAD$/],
      ['/healthz', 'GET, HEAD', /^CONNECT is not allowed on \/healthz; use GET, HEAD$/],
    ] as const) {
      it(`answers CONNECT ${target} with 405, Allow and the Error shape, and closes`, async () => {
        const { statusLine, headers, body } = parseRaw(
          await rawExchange(`CONNECT ${target} HTTP/1.1\r\nHost: x\r\nX-Request-Id: connect-1\r\n\r\n`),
        )
        assert.equal(statusLine, 'HTTP/1.1 405 Method Not Allowed')
        assert.equal(headers.allow, allow)
        assert.equal(headers['content-type'], 'application/json; charset=utf-8')
        assert.equal(headers.connection, 'close')
        assert.equal(headers['x-request-id'], 'connect-1')
        assert.equal(body.error, 405)
        assert.equal(body.code, 'METHOD_NOT_ALLOWED')
        assert.match(body.message, pattern)
        assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'message'])
        assert.equal((await request('GET', `${service.url}/healthz`)).status, 200)
      })
    }

    for (const target of ['127.0.0.1:80', 'example.com:443', '/nope']) {
      it(`answers CONNECT ${target} with 501 in the Error shape, and closes`, async () => {
        const { statusLine, headers, body } = parseRaw(
          await rawExchange(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`),
        )
        assert.equal(statusLine, 'HTTP/1.1 501 Not Implemented')
        assert.equal(headers.allow, undefined)
        assert.equal(headers['content-type'], 'application/json; charset=utf-8')
        assert.equal(headers.connection, 'close')
        assert.match(headers['x-request-id'] ?? '', /^[0-9a-f-]{36}$/)
        assert.equal(body.error, 501)
        assert.equal(body.code, 'METHOD_NOT_IMPLEMENTED')
        assert.match(body.message, /^CONNECT is not implemented/)
        assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'message'])
        assert.equal((await request('GET', `${service.url}/healthz`)).status, 200)
      })
    }

    it('serves /healthz and /readyz as JSON', async () => {
      const health = await request('GET', `${service.url}/healthz`)
      assert.deepEqual(health.json, { status: 'ok' })
      const ready = await request('GET', `${service.url}/readyz`)
      const { details, ...readiness } = ready.json
      assert.deepEqual(readiness, { status: 'ready', store })
      // SQLite reports its WAL's size; PostgreSQL has no details.
      if (store === 'sqlite') assert.ok(Number.isInteger(details.walBytes), ready.text)
      else assert.equal(details, undefined)
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
