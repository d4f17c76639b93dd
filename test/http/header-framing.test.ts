import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { startService, type TestService } from '../helpers.js'
import { request } from '../http-client.js'
import { rawExchange, statusLines } from './raw-socket.js'

describe('header blocks past Node limits, and framing HTTP/1.0 cannot have', () => {
  let service: TestService
  let token: string
  before(async () => {
    service = await startService('sqlite')
    token = await service.token()
  })
  after(() => service.close())

  const stored = async (id: number) => (await request('GET', `${service.url}/plants/${id}`, { token })).status

  /** A create of plant `id` whose head holds `filler` short lines, then `late` lines. */
  const create = (id: number, filler: number, late: string[], version = '1.1') => {
    const body = JSON.stringify({ id, name: `plant ${id}` })
    return (
      `POST /plants HTTP/${version}\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
      `${'a: 1\r\n'.repeat(filler)}${late.map((line) => `${line}\r\n`).join('')}\r\n${body}`
    )
  }

  it('refuses with 431 a second Authorization after 2,000 header lines, and stores nothing', async () => {
    const { received, closed } = await rawExchange(
      service.url,
      create(401, 2000, ['Authorization: Bearer x']),
    )
    assert.deepEqual(statusLines(received), ['HTTP/1.1 431'], received)
    assert.match(received, /"code":"HEADERS_TOO_LARGE"/)
    assert.ok(closed)
    assert.equal(await stored(401), 404)
  })

  it('refuses with 431 a Transfer-Encoding: gzip, chunked after 2,000 header lines, and stores nothing', async () => {
    const body = JSON.stringify({ id: 402, name: 'gzip' })
    const head =
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
      `${'a: 1\r\n'.repeat(2000)}Transfer-Encoding: gzip, chunked\r\n\r\n`
    const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
    const { received, closed } = await rawExchange(service.url, head + chunked)
    assert.deepEqual(statusLines(received), ['HTTP/1.1 431'], received)
    assert.ok(closed)
    assert.equal(await stored(402), 404)
  })

  it('counts the whole header block: 17,014 bytes of short lines are a 431, 16,000 bytes are served', async () => {
    const blockOf = (size: number, id: number) => {
      const start = create(id, 0, [])
      const headEnd = start.indexOf('\r\n\r\n') + 4
      const bare = headEnd // request line and headers, with the empty line that ends them
      const lines: string[] = []
      let total = bare
      while (total + 26 <= size) {
        lines.push(`x-pad-${String(lines.length).padStart(4, '0')}: ab`) // 16 bytes with CRLF
        total += 16
      }
      lines.push(`x-rest: ${'b'.repeat(size - total - 10)}`)
      const request = create(id, 0, lines)
      assert.equal(request.indexOf('\r\n\r\n') + 4, size)
      return request
    }
    const over = await rawExchange(service.url, blockOf(17_014, 403))
    assert.deepEqual(statusLines(over.received), ['HTTP/1.1 431'], over.received)
    assert.equal(await stored(403), 404)
    const under = await rawExchange(service.url, `${blockOf(16_000, 404).replace('HTTP/1.1', 'HTTP/1.0')}`)
    assert.deepEqual(statusLines(under.received), ['HTTP/1.1 200'], under.received)
    assert.equal(await stored(404), 200)
  })

  it('answers HTTP/1.0 with Transfer-Encoding: chunked 400, closes, and serves nothing pipelined', async () => {
    const body = JSON.stringify({ id: 405, name: 'old' })
    const head =
      `POST /plants HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
      'Transfer-Encoding: chunked\r\n\r\n'
    const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
    const second = create(406, 0, [])
    const { received, closed } = await rawExchange(service.url, head + chunked + second)
    assert.deepEqual(statusLines(received), ['HTTP/1.1 400'], received)
    assert.match(received, /Transfer-Encoding is not allowed in an HTTP\/1\.0 request/)
    assert.match(received, /\r\nconnection: close\r\n/i)
    assert.ok(closed)
    assert.equal(await stored(405), 404)
    assert.equal(await stored(406), 404)
  })

  it('gives Transfer-Encoding: xchunked exactly one answer, 501', async () => {
    const head =
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
      'Transfer-Encoding: xchunked\r\n\r\n{"id":407,"name":"x"}'
    const { received, closed } = await rawExchange(service.url, head)
    assert.deepEqual(statusLines(received), ['HTTP/1.1 501'], received)
    assert.match(received, /"code":"UNSUPPORTED_TRANSFER_CODING"/)
    assert.ok(closed)
    assert.equal(await stored(407), 404)
  })
})
