import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, it } from 'node:test'
import postgres from 'postgres'

/**
 * postgres.js 3.4.9 left a connection's running query set when its socket closed. A FATAL error
 * sent while the next connection started up ("the database system is starting up", 57P03) was
 * then kept as that old query's, and the next healthy startup failed its first query with it: an
 * instance answered 503 13 s after PostgreSQL was back (a black-box audit, issue 4).
 * patches/postgres+3.4.9.patch clears the query on close; this test fails without it.
 *
 * The server is a fake speaking just enough of protocol v3, so each connection does exactly what
 * the story needs: the first dies under a query, the second refuses with 57P03, the rest answer.
 */
const int32 = (value: number) => {
  const buffer = Buffer.alloc(4)
  buffer.writeInt32BE(value)
  return buffer
}
const message = (type: string, body: Buffer = Buffer.alloc(0)) =>
  Buffer.concat([Buffer.from(type, 'latin1'), int32(body.length + 4), body])
const fields = (pairs: [string, string][]) =>
  Buffer.concat([...pairs.map(([key, value]) => Buffer.from(`${key}${value}\0`)), Buffer.from('\0')])

const handshake = Buffer.concat([
  message('R', int32(0)),
  message('K', Buffer.concat([int32(1), int32(2)])),
  message('Z', Buffer.from('I')),
])
const startingUp = message(
  'E',
  fields([
    ['S', 'FATAL'],
    ['V', 'FATAL'],
    ['C', '57P03'],
    ['M', 'the database system is starting up'],
  ]),
)

/** The answer of a healthy server to one message of the extended (or simple) query protocol. */
function answer(type: string, body: Buffer): Buffer {
  if (type === 'P') return message('1')
  if (type === 'B') return message('2')
  if (type === 'D')
    return body[0] === 'S'.charCodeAt(0)
      ? Buffer.concat([message('t', Buffer.from([0, 0])), message('n')])
      : message('n')
  if (type === 'E') return message('C', Buffer.from('SELECT 0\0'))
  if (type === 'S') return message('Z', Buffer.from('I'))
  if (type === 'Q')
    return Buffer.concat([message('C', Buffer.from('SELECT 0\0')), message('Z', Buffer.from('I'))])
  return Buffer.alloc(0)
}

let connections = 0
const server = net.createServer((socket) => {
  const number = ++connections
  let pending = Buffer.alloc(0)
  let started = false
  socket.on('error', () => {})
  socket.on('data', (chunk) => {
    pending = Buffer.concat([pending, chunk])
    if (!started) {
      if (pending.length < 4 || pending.length < pending.readInt32BE(0)) return
      pending = pending.subarray(pending.readInt32BE(0))
      started = true
      if (number === 2) return socket.end(startingUp)
      socket.write(handshake)
    }
    // The first connection dies as soon as a query reaches it, as under `pg_ctl -m immediate stop`.
    if (number === 1 && pending.length > 0) return socket.destroy()
    while (pending.length >= 5 && pending.length >= 1 + pending.readInt32BE(1)) {
      const end = 1 + pending.readInt32BE(1)
      socket.write(answer(String.fromCharCode(pending[0] as number), pending.subarray(5, end)))
      pending = pending.subarray(end)
    }
  })
})

let sql: postgres.Sql
before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  sql = postgres({
    host: '127.0.0.1',
    port,
    user: 'test',
    database: 'test',
    max: 1,
    fetch_types: false,
    connect_timeout: 5,
    backoff: () => 0.01,
    onnotice: () => {},
  })
})

after(async () => {
  await sql.end({ timeout: 1 })
  server.close()
})

it('postgres.js fails a query with the error of its own connection, never one kept from before', async () => {
  await assert.rejects(sql.unsafe('select 1'), 'the connection died under it')
  let failedOn = 0
  const error = await sql.unsafe('select 2').then(
    () => undefined,
    (reason: { code?: string }) => {
      failedOn = connections
      return reason
    },
  )
  assert.equal(error?.code, '57P03', 'the server was starting up when this query asked to connect')
  assert.equal(failedOn, 2, 'failed by the connection that was refused, not by the next, healthy one')
  assert.deepEqual([...(await sql.unsafe('select 3'))], [])
})
