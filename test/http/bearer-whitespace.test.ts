import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import { startService, type TestService } from '../helpers.js'
import { request } from '../http-client.js'

/**
 * Authorization values that the old pattern backtracked on, each as long as a request with only
 * `Host: x` besides may carry within the 16 KiB header limit: `Bearer x` + 16,300 spaces + `y`.
 */
const spaces = ' '.repeat(16_300)
const hostileValues = [
  `Bearer x${spaces}y`,
  `Bearer x${' \t'.repeat(8_150)}y`,
  `Bearer x${spaces}`,
  `${spaces}Bearer x y`,
  `Bearer${spaces}`,
  `Bearer ${'x '.repeat(8_150)}y`,
]

/** Sends `count` GETs one after the other on one keep-alive connection; resolves to their statuses. */
function sendInTurn(url: string, values: string[]): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1')
    const statuses: number[] = []
    let received = ''
    const next = () => {
      const value = values[statuses.length]
      if (value === undefined) {
        socket.end()
        return resolve(statuses)
      }
      socket.write(`GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: ${value}\r\n\r\n`)
    }
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      received += chunk
      // Each answer is JSON with a Content-Length; one ends where its body's closing brace does.
      for (;;) {
        const head = /^HTTP\/1\.1 (\d{3}) [^\r]*\r\n[\s\S]*?content-length: (\d+)\r\n[\s\S]*?\r\n\r\n/i.exec(
          received,
        )
        if (!head) break
        const end = head[0].length + Number(head[2])
        if (received.length < end) break
        const body = JSON.parse(received.slice(head[0].length, end))
        assert.equal(body.error, Number(head[1]))
        statuses.push(Number(head[1]))
        received = received.slice(end)
        next()
      }
    })
    socket.on('error', reject)
    socket.on('close', () =>
      statuses.length < values.length ? reject(new Error('closed early')) : undefined,
    )
    next()
  })
}

describe('an Authorization header built to make the parser backtrack', () => {
  let service: TestService
  before(async () => {
    // Failed authentication is rate limited per address; this test is about the parser.
    service = await startService('sqlite', { AUTH_FAILURE_LIMIT: '0' })
  })
  after(() => service.close())

  // 480 such requests cost the old pattern over a minute of event loop; the test's timeout is the
  // bound, far above what a linear parser needs.
  it(
    'answers 480 of them on 16 connections with a plain 401, and /healthz meanwhile',
    { timeout: 40_000 },
    async () => {
      const perConnection = Array.from(
        { length: 30 },
        (_, i) => hostileValues[i % hostileValues.length] as string,
      )
      const burst = Promise.all(Array.from({ length: 16 }, () => sendInTurn(service.url, perConnection)))
      const health = await request('GET', `${service.url}/healthz`)
      const statuses = (await burst).flat()
      assert.equal(health.status, 200)
      assert.equal(statuses.length, 480)
      assert.deepEqual(new Set(statuses), new Set([401]))
    },
  )
})
