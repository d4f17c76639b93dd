import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import { startService, type TestService } from '../helpers.js'
import { statusLines } from './raw-socket.js'

const MiB = 1024 * 1024
const LINGER_BYTES = MiB

/**
 * Sends a request head and then up to `bodyBytes` of body, 64 KiB at a time, each write waiting for
 * the last, as a client that uploads while reading would; stops when the connection fails. Resolves
 * to what the server sent, once it has closed the connection.
 */
function upload(url: string, head: string, bodyBytes: number, chunked: boolean): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1')
    let received = ''
    let failed = false
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      received += chunk
    })
    socket.on('error', () => {
      failed = true
    })
    socket.on('close', () => resolve(received))
    const piece = Buffer.alloc(64 * 1024, 'a')
    const frame = chunked ? Buffer.from(`${piece.length.toString(16)}\r\n`) : Buffer.alloc(0)
    const end = chunked ? Buffer.from('\r\n') : Buffer.alloc(0)
    let sent = 0
    const next = (error?: Error | null) => {
      if (error || failed || socket.destroyed) return
      if (sent >= bodyBytes) {
        if (chunked) socket.write('0\r\n\r\n')
        return
      }
      sent += piece.length
      socket.write(Buffer.concat([frame, piece, end]), next)
    }
    socket.write(head, next)
  })
}

const framings = [
  { name: 'Content-Length', chunked: false },
  { name: 'chunked', chunked: true },
]

describe('an answer sent before its request body is read (lingering close)', () => {
  let service: TestService
  let token: string
  const readBySocket: number[] = []
  before(async () => {
    service = await startService('sqlite', { AUTH_FAILURE_LIMIT: '0', LINGER_BYTES: String(LINGER_BYTES) })
    token = await service.token()
    service.server.app.server.on('connection', (socket: net.Socket) => {
      socket.on('close', () => readBySocket.push(socket.bytesRead))
    })
  })
  after(() => service.close())

  const head = (method: string, path: string, auth: string, bytes: number, chunked: boolean) =>
    `${method} ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\n` +
    (chunked ? 'Transfer-Encoding: chunked\r\n\r\n' : `Content-Length: ${bytes}\r\n\r\n`)

  const cases = [
    {
      status: 413,
      method: 'POST',
      path: '/plants',
      auth: () => `Authorization: Bearer ${token}\r\n`,
      runs: 100,
    },
    { status: 401, method: 'POST', path: '/plants', auth: () => 'Authorization: Bearer nope\r\n', runs: 100 },
    { status: 404, method: 'POST', path: '/nowhere', auth: () => '', runs: 20 },
    { status: 405, method: 'PUT', path: '/plants', auth: () => '', runs: 20 },
  ]
  for (const size of [2 * MiB, 64 * MiB]) {
    for (const { name, chunked } of framings) {
      for (const { status, method, path, auth, runs } of cases) {
        it(`answers ${runs} of ${runs} ${status}s to ${size / MiB} MiB ${name} bodies, and reads at most ~${LINGER_BYTES / MiB} MiB more`, async (t) => {
          readBySocket.length = 0
          const answers: string[] = []
          for (let run = 0; run < runs; run++) {
            const received = await upload(
              service.url,
              head(method, path, auth(), size, chunked),
              size,
              chunked,
            )
            answers.push(statusLines(received).join(' '))
            assert.match(received, /\r\nconnection: close\r\n/i)
          }
          assert.deepEqual(new Set(answers), new Set([`HTTP/1.1 ${status}`]))
          // What a socket reads past its answer is the bound plus what was in flight: the body the
          // request had delivered before (Fastify reads up to BODY_LIMIT) and Node's read buffers.
          const most = Math.max(...readBySocket)
          t.diagnostic(`most bytes one socket read: ${most}`)
          assert.ok(most < LINGER_BYTES + 512 * 1024, `a socket read ${most} bytes`)
        })
      }
    }
  }
})
