import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { setTimeout as sleep } from 'node:timers/promises'
import { startService, type TestService } from '../helpers.js'
import { rawRequest, request } from '../http-client.js'

/** A raw HTTP/1.1 exchange: writes `head`, collects what the server sends until `until` matches. */
class RawClient {
  private received = ''
  private readonly socket: net.Socket

  constructor(url: string) {
    this.socket = net.connect(Number(new URL(url).port), '127.0.0.1')
    this.socket.setEncoding('utf8')
    this.socket.on('data', (chunk: string) => {
      this.received += chunk
    })
  }

  write(text: string): void {
    this.socket.write(text)
  }

  /** Everything received once `pattern` matches, or after `ms` if it never does. */
  async waitFor(pattern: RegExp, ms = 2000): Promise<string> {
    const deadline = Date.now() + ms
    while (!pattern.test(this.received) && Date.now() < deadline) await sleep(10)
    return this.received
  }

  close(): void {
    this.socket.destroy()
  }
}

describe('HTTP protocol details: Expect and percent-encoding on every route', () => {
  let service: TestService
  let token: string
  before(async () => {
    service = await startService('sqlite', { BODY_LIMIT: '1024' })
    token = await service.token()
  })
  after(() => service.close())

  const postHead = (headers: string, length: number, path = '/plants') =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n` +
    `Expect: 100-continue\r\n${headers}\r\n`

  /** Sends the head of a request that waits for 100 Continue; resolves to everything received. */
  const answerWithoutBody = async (head: string) => {
    const client = new RawClient(service.url)
    try {
      client.write(head)
      return await client.waitFor(/\r\n\r\n\{.*\}$/s)
    } finally {
      client.close()
    }
  }

  it('sends no 100 Continue to a client without a token: it hears 401 before uploading anything', async () => {
    const received = await answerWithoutBody(postHead('', 40))
    assert.match(received, /^HTTP\/1\.1 401 /, received)
    assert.doesNotMatch(received, /100 Continue/)
  })

  it('sends 100 Continue once the token is checked, then stores the body that follows', async () => {
    const client = new RawClient(service.url)
    const body = '{"id":171,"name":"continued"}'
    try {
      client.write(postHead(`Authorization: Bearer ${token}\r\n`, body.length))
      const interim = await client.waitFor(/^HTTP\/1\.1 100 Continue\r\n\r\n/)
      assert.equal(interim, 'HTTP/1.1 100 Continue\r\n\r\n')
      client.write(body)
      const received = await client.waitFor(/\{"name":"continued"\}$/)
      assert.match(received, /HTTP\/1\.1 200 OK/)
    } finally {
      client.close()
    }
    assert.equal((await request('GET', `${service.url}/plants/171`, { token })).status, 200)
  })

  it('sends no 100 Continue for a body over BODY_LIMIT: 413 at once', async () => {
    const received = await answerWithoutBody(postHead(`Authorization: Bearer ${token}\r\n`, 5000))
    assert.match(received, /^HTTP\/1\.1 413 /, received)
    assert.doesNotMatch(received, /100 Continue/)
  })

  it('answers a POST to an unknown path with 404 at once, body unread, to a client waiting for 100', async () => {
    const received = await answerWithoutBody(postHead(`Authorization: Bearer ${token}\r\n`, 19, '/nope'))
    assert.match(received, /^HTTP\/1\.1 404 /, received)
    assert.doesNotMatch(received, /100 Continue/)
  })

  it('answers an expectation other than 100-continue with 417 in the Error shape', async () => {
    // fetch refuses to send Expect at all; node:http sends it as given.
    const response = await rawRequest(
      `${service.url}/plants`,
      'POST',
      { authorization: `Bearer ${token}`, 'content-type': 'application/json', expect: 'something-else' },
      '{"id":172,"name":"expectant"}',
    )
    assert.equal(response.status, 417)
    assert.match(String(response.headers['content-type']), /^application\/json/)
    const json = JSON.parse(response.text)
    assert.equal(json.error, 417)
    assert.equal(json.code, 'EXPECTATION_FAILED')
    assert.match(json.message, /Expect header "something-else" is not supported/)
    assert.ok(response.headers['x-request-id'])
    assert.equal(response.headers.connection, 'close', 'the unread body cannot be taken for a request')
    assert.equal((await request('GET', `${service.url}/plants/172`, { token })).status, 404)
  })

  /** The head of an authorized create of `body`, with `lines` among its headers. */
  const createHead = (body: string, lines: string[]) =>
    `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${body.length}\r\n${lines.join('\r\n')}\r\n\r\n`

  // Node's own test finds "100-continue" anywhere in the value; RFC 9110 has no other expectation.
  let expectId = 180
  for (const lines of [
    ['Expect: x-100-continue'],
    ['Expect: 100-continue-please'],
    ['Expect: nope 100-continue'],
    ['Expect: foo, 100-continue'],
    ['Expect: 100-continue;x=1'],
    ['Expect: 100-continue', 'Expect: foo'],
  ]) {
    it(`answers 417 to ${lines.join(' + ')}, and stores nothing`, async () => {
      const id = expectId++
      const body = `{"id":${id},"name":"expectant"}`
      const client = new RawClient(service.url)
      try {
        client.write(createHead(body, lines) + body)
        const received = await client.waitFor(/\r\n\r\n\{.*\}$/s)
        assert.match(received, /^HTTP\/1\.1 417 /, received)
        assert.doesNotMatch(received, /100 Continue/)
      } finally {
        client.close()
      }
      assert.equal((await request('GET', `${service.url}/plants/${id}`, { token })).status, 404)
    })
  }

  for (const value of ['100-CONTINUE', '100-continue, ', ' 100-continue ,100-continue']) {
    it(`takes Expect: "${value}" for 100-continue`, async () => {
      const id = expectId++
      const body = `{"id":${id},"name":"continued"}`
      const client = new RawClient(service.url)
      try {
        client.write(createHead(body, [`Expect: ${value}`]))
        assert.equal(await client.waitFor(/100 Continue\r\n\r\n/), 'HTTP/1.1 100 Continue\r\n\r\n')
        client.write(body)
        assert.match(await client.waitFor(/\{"name":"continued"\}$/), /HTTP\/1\.1 200 OK/)
      } finally {
        client.close()
      }
    })
  }

  for (const [method, path] of [
    ['GET', '/plants/1?x=%ff'],
    ['DELETE', '/plants/173?x=%'],
    ['POST', '/plants?x=%E0%A4%A'],
    ['GET', '/healthz?x=%ff'],
  ] as const) {
    it(`answers 400 for bad percent-encoding in the query of ${method} ${path.split('?')[0]}`, async () => {
      await request('POST', `${service.url}/plants`, { token, body: { id: 173, name: 'kept' } })
      const body = method === 'POST' ? { id: 174, name: 'refused' } : undefined
      const response = await request(method, `${service.url}${path}`, { token, body })
      assert.equal(response.status, 400, response.text)
      assert.match(
        response.json.message,
        /^query parameter x has bad percent-encoding: each % needs two hex digits/,
      )
      assert.equal((await request('GET', `${service.url}/plants/173`, { token })).status, 200)
      assert.equal((await request('GET', `${service.url}/plants/174`, { token })).status, 404)
    })
  }

  it('answers the requests of a client that shut its side of the connection after sending them', async () => {
    const body = '{"id":175,"name":"half-closed"}'
    const received = await new Promise<string>((resolve, reject) => {
      let text = ''
      const socket = net.connect(Number(new URL(service.url).port), '127.0.0.1')
      socket.setEncoding('utf8')
      socket.on('data', (chunk: string) => (text += chunk))
      socket.on('error', reject)
      socket.on('close', () => resolve(text))
      socket.end(
        `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${body.length}\r\n\r\n${body}` +
          'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n',
      )
    })
    const [created, health] = received.split(/(?=HTTP\/1\.1 )/)
    assert.match(created ?? '', /^HTTP\/1\.1 200 OK\r\n[^]*\r\n\r\n\{"name":"half-closed"\}$/, received)
    assert.match(health ?? '', /^HTTP\/1\.1 200 OK\r\n/, received)
    const read = await request('GET', `${service.url}/plants/175`, { token })
    assert.equal(read.text, '{"id":175,"name":"half-closed"}')
  })

  /** Writes `text` at once and resolves to everything received until the server closes. */
  const exchange = (text: string) =>
    new Promise<{ received: string; statuses: string[] }>((resolve, reject) => {
      let received = ''
      const socket = net.connect(Number(new URL(service.url).port), '127.0.0.1')
      socket.setEncoding('utf8')
      socket.on('data', (chunk: string) => (received += chunk))
      socket.on('error', reject)
      socket.on('close', () =>
        resolve({
          received,
          statuses: [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1] ?? ''),
        }),
      )
      socket.write(text)
    })
  const post = (id: number, name: string) => {
    const body = `{"id":${id},"name":"${name}"}`
    return (
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\n\r\n${body}`
    )
  }
  const bare = (method: string, path: string, last = false) =>
    `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n${last ? 'Connection: close\r\n' : ''}\r\n`

  it('handles pipelined requests in order: a create, a delete and a read of one id in one write', async () => {
    for (let round = 0; round < 5; round++) {
      const id = 1900 + round
      const { statuses, received } = await exchange(
        post(id, 'piped') + bare('DELETE', `/plants/${id}`) + bare('GET', `/plants/${id}`, true),
      )
      assert.deepEqual(statuses, ['200', '204', '404'], received)
      assert.equal((await request('GET', `${service.url}/plants/${id}`, { token })).status, 404)
    }
  })

  it('handles pipelined requests in order: a read after a delete misses the plant', async () => {
    assert.equal(
      (await request('POST', `${service.url}/plants`, { token, body: { id: 1910, name: 'x' } })).status,
      200,
    )
    const { statuses, received } = await exchange(
      bare('DELETE', '/plants/1910') +
        bare('GET', '/plants/1910') +
        post(1910, 'back') +
        bare('GET', '/plants/1910', true),
    )
    assert.deepEqual(statuses, ['204', '404', '200', '200'], received)
    assert.match(received, /\{"id":1910,"name":"back"\}$/)
  })

  it('never handles a pipelined request whose connection was reset while it waited for its turn', async () => {
    // Another connection's write lock keeps the first create waiting (the writer retries BEGIN).
    const blocker = new Database(service.env.PLANT_STORE_DB ?? '')
    try {
      blocker.exec('BEGIN IMMEDIATE')
      const socket = net.connect(Number(new URL(service.url).port), '127.0.0.1')
      socket.on('error', () => {})
      socket.write(post(1940, 'first') + post(1941, 'second'))
      // No client can see the first create start (it waits on the lock): give it time to.
      await sleep(300)
      // A reset, not a close: after a FIN the server still answers, as to a half-closed client.
      socket.resetAndDestroy()
      // The reset must reach the server before the lock goes; nothing signals its arrival.
      await sleep(100)
      blocker.exec('COMMIT')
    } finally {
      blocker.close()
    }
    const read = (id: number) => request('GET', `${service.url}/plants/${id}`, { token })
    const deadline = Date.now() + 5000
    while ((await read(1940)).status !== 200 && Date.now() < deadline) await sleep(20)
    assert.equal((await read(1940)).status, 200, 'the first create was under way: it is stored')
    assert.equal((await read(1941)).status, 404, 'the second never began')
  })

  it('answers a request that arrived before bytes that are not HTTP, then refuses those', async () => {
    const { statuses, received } = await exchange(post(1920, 'before garbage') + 'GARBAGE\r\n\r\n')
    assert.deepEqual(statuses, ['200', '400'], received)
    assert.match(received, /\{"name":"before garbage"\}HTTP\/1\.1 400 /)
    assert.match(received, /"code":"BAD_HTTP_REQUEST"/)
    assert.equal((await request('GET', `${service.url}/plants/1920`, { token })).status, 200)
  })

  it('closes the connection after a request asking to upgrade: what was pipelined behind it is not taken', async () => {
    const upgrade = 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n'
    const started = Date.now()
    const { statuses, received } = await exchange(upgrade + post(1930, 'behind an upgrade'))
    // Not after the keep-alive timeout (6 s by default): the server closes it itself.
    assert.ok(Date.now() - started < 3000, `closed after ${Date.now() - started} ms`)
    assert.deepEqual(statuses, ['200'], received)
    assert.match(received, /\r\nconnection: close\r\n/i)
    assert.equal((await request('GET', `${service.url}/plants/1930`, { token })).status, 404)
  })

  it('builds the next link from an absolute-form target, not from Host (RFC 9112 3.2.2)', async () => {
    for (const id of [1950, 1951]) {
      await request('POST', `${service.url}/plants`, { token, body: { id, name: 'absolute' } })
    }
    const { received } = await exchange(
      bare('GET', 'http://other.example:8443/plants?limit=1&after=1949', true),
    )
    assert.match(received, /^HTTP\/1\.1 200 /, received)
    assert.match(
      received,
      /\r\nlink: <http:\/\/other\.example:8443\/plants\?limit=1&after=1950>; rel="next"\r\n/i,
    )
  })

  const chunkedPost = (id: number, codings: string) => {
    const body = `{"id":${id},"name":"coded"}`
    return (
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
      `Transfer-Encoding: ${codings}\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
    )
  }

  for (const [id, codings] of [
    [1960, 'gzip, chunked'],
    [1961, 'x-custom, chunked'],
    [1962, 'identity, chunked'],
  ] as const) {
    it(`answers 501 to Transfer-Encoding: ${codings}, stores nothing and closes (RFC 9112 6.1)`, async () => {
      // Pipelined behind it, a request that must not be taken: the connection is closed.
      const { statuses, received } = await exchange(chunkedPost(id, codings) + bare('GET', '/healthz'))
      assert.deepEqual(statuses, ['501'], received)
      assert.match(received, /\r\nconnection: close\r\n/i)
      const body = JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4))
      assert.deepEqual(body, {
        error: 501,
        message: `Transfer-Encoding "${codings}" is not supported: it must be absent or chunked`,
        code: 'UNSUPPORTED_TRANSFER_CODING',
        details: [{ field: 'Transfer-Encoding', rule: 'must be absent or chunked' }],
      })
      assert.equal((await request('GET', `${service.url}/plants/${id}`, { token })).status, 404)
    })
  }

  it('takes Transfer-Encoding: chunked in any case as chunked', async () => {
    const { statuses, received } = await exchange(
      chunkedPost(1963, 'Chunked') + bare('GET', '/healthz', true),
    )
    assert.deepEqual(statuses, ['200', '200'], received)
    assert.equal((await request('GET', `${service.url}/plants/1963`, { token })).status, 200)
  })

  for (const version of ['2.0', '0.9']) {
    it(`answers 505 to a request line naming HTTP/${version}, and closes`, async () => {
      const line = `GET /plants/1 HTTP/${version}\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`
      const { received } = await exchange(line + bare('GET', '/healthz'))
      assert.match(received, /^HTTP\/1\.1 505 HTTP Version Not Supported\r\n/, received)
      assert.equal(received.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, received)
      assert.match(received, /\r\nconnection: close\r\n/i)
      const body = JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4))
      assert.equal(body.error, 505)
      assert.equal(body.code, 'HTTP_VERSION_NOT_SUPPORTED')
      assert.equal(
        body.message,
        `HTTP/${version} is not supported: the request line must name HTTP/1.1 or HTTP/1.0`,
      )
    })
  }

  it('serves HTTP/1.0', async () => {
    const { received } = await exchange('GET /healthz HTTP/1.0\r\n\r\n')
    assert.match(received, /^HTTP\/1\.1 200 OK\r\n/, received)
  })

  it('checks the token before the query: 401 first', async () => {
    const response = await request('GET', `${service.url}/plants/1?x=%ff`)
    assert.equal(response.status, 401)
  })
})
