import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import { ConfigError, loadConfig } from '../../src/config.js'
import { descriptorBudget, openFileLimit } from '../../src/descriptor-budget.js'
import { addressKey } from '../../src/http/client-address.js'
import { onRefusal, type RefusalKind } from '../../src/http/refusals.js'
import { startService, type TestService, waitFor } from '../helpers.js'
import { request } from '../http-client.js'

interface Client {
  socket: net.Socket
  received: () => string
  closed: () => boolean
}

/** Opens a connection that sends nothing until told; records what comes back and whether it closed. */
async function connect(url: string): Promise<Client> {
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1')
  let received = ''
  let closed = false
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => {
    received += chunk
  })
  socket.on('error', () => {})
  socket.on('close', () => {
    closed = true
  })
  await new Promise((resolve) => socket.once('connect', resolve))
  return { socket, received: () => received, closed: () => closed }
}

/** A refusal for a connection over a cap: 503 in the Error shape, Retry-After, Connection: close. */
function assertRefusal(received: string, cap: RegExp): void {
  const [head = '', body = ''] = received.split('\r\n\r\n')
  assert.match(head, /^HTTP\/1\.1 503 /)
  assert.match(head, /\r\nretry-after: 1\r\n/i)
  assert.match(head, /\r\nconnection: close\r\n/i)
  const json = JSON.parse(body)
  assert.equal(json.error, 503)
  assert.equal(json.code, 'TOO_MANY_CONNECTIONS')
  assert.match(json.message, cap)
}

const healthzOn = async (client: Client) => {
  client.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
  return waitFor('an answer to /healthz', () => /\{"status":"ok"\}/.test(client.received()))
}

describe('connection caps', () => {
  const refusals: RefusalKind[] = []
  const unsubscribe = onRefusal((kind) => refusals.push(kind))
  after(unsubscribe)

  describe('per client address (MAX_CONNECTIONS_PER_ADDRESS=4)', () => {
    let service: TestService
    before(async () => {
      service = await startService('sqlite', { MAX_CONNECTIONS_PER_ADDRESS: '4' })
    })
    after(() => service.close())

    it('answers the 5th to 7th connections from one address 503 with Retry-After, closes them, and serves the first 4', async () => {
      const allowed = await Promise.all(Array.from({ length: 4 }, () => connect(service.url)))
      const before = refusals.length
      const extra = await Promise.all(Array.from({ length: 3 }, () => connect(service.url)))
      for (const client of extra) {
        client.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
        await waitFor('the extra connection to be closed', () => client.closed())
        assertRefusal(client.received(), /this client address holds as many connections as it may \(4\)/)
      }
      assert.deepEqual(refusals.slice(before), Array(3).fill('connections-per-address'))
      for (const client of allowed) await healthzOn(client)
      assert.ok(allowed.every((client) => !client.closed()))
      // A closed connection frees its place.
      allowed[0]?.socket.destroy()
      await waitFor('the server to see the close', async () => {
        const next = await connect(service.url)
        next.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
        const answer = await waitFor('an answer', () => /\r\n\r\n\{.*\}/.exec(next.received())?.[0])
        next.socket.destroy()
        return answer.includes('"status":"ok"')
      })
      for (const client of allowed) client.socket.destroy()
    })
  })

  describe('in all (MAX_CONNECTIONS=5)', () => {
    let service: TestService
    before(async () => {
      service = await startService('sqlite', { MAX_CONNECTIONS: '5', MAX_CONNECTIONS_PER_ADDRESS: '0' })
    })
    after(() => service.close())

    it('answers a connection past the cap 503 and closes it, and fetch still gets answers once one is free', async () => {
      const open = await Promise.all(Array.from({ length: 5 }, () => connect(service.url)))
      const before = refusals.length
      const sixth = await connect(service.url)
      sixth.socket.write(
        'POST /plants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
      )
      await waitFor('the sixth connection to be closed', () => sixth.closed())
      assertRefusal(sixth.received(), /the service holds as many connections as it may \(5\)/)
      assert.deepEqual(refusals.slice(before), ['connections'])
      await healthzOn(open[0] as Client)
      for (const client of open) client.socket.destroy()
      await waitFor(
        'a request to be served again',
        // A connection accepted while the server still counted the closed ones is dropped, and
        // fetch may then wait forever: each try is bounded.
        async () => (await request('GET', `${service.url}/healthz`, { timeoutMs: 2000 })).status === 200,
      )
    })
  })

  it('closes a refused connection that sends no request head within 2 s', async () => {
    const service = await startService('sqlite', { MAX_CONNECTIONS_PER_ADDRESS: '1' })
    try {
      const first = await connect(service.url)
      const silent = await connect(service.url)
      await waitFor('the silent refused connection to be closed', () => silent.closed(), 5_000)
      assert.equal(silent.received(), '')
      await healthzOn(first)
      first.socket.destroy()
    } finally {
      await service.close()
    }
  })

  it('derives the default cap from the descriptor budget: the open-file limit less what the process holds', () => {
    const limits = (soft: string) =>
      `Limit                     Soft Limit           Hard Limit           Units\nMax open files            ${soft}                 1048576              files\n`
    const sqlite = {
      databaseUrl: undefined,
      dbPoolSize: 10,
      webhookWorker: true,
      metricsPort: undefined,
      tracing: false,
      logFormat: 'json',
    } as const
    assert.equal(openFileLimit(limits('1024')), 1024)
    // 40 for the process, 12 for SQLite's files, 128 webhook sends, 64 (a 16th) for refusals.
    assert.equal(descriptorBudget(sqlite, limits('1024')).maxConnections, 1024 - 40 - 12 - 128 - 64)
    // Under ulimit -n 256, with METRICS_PORT (16 connections and its listener): 16 for refusals.
    assert.equal(
      descriptorBudget({ ...sqlite, metricsPort: 0 }, limits('256')).maxConnections,
      256 - 40 - 12 - 128 - 17 - 16,
    )
    // PostgreSQL: the pool and a spare instead of SQLite's files; no worker, no sends.
    const pg = { ...sqlite, databaseUrl: 'postgres://x/test', dbPoolSize: 20, webhookWorker: false }
    assert.equal(descriptorBudget(pg, limits('20000')).maxConnections, 20000 - 40 - 21 - 256)
    // A read pool takes its share of DB_POOL_SIZE, and a spare of its own.
    const split = { ...pg, databaseReadUrl: 'postgres://replica/test' }
    assert.equal(descriptorBudget(split, limits('20000')).maxConnections, 20000 - 40 - 22 - 256)
    assert.equal(descriptorBudget(sqlite, 'no such line').files, 1024, 'an unreadable limit is taken as 1024')
    assert.equal(descriptorBudget(sqlite, limits('100')).maxConnections, 1, 'never below 1')
    const config = loadConfig({})
    assert.equal(config.maxConnections, descriptorBudget(config).maxConnections)
    assert.equal(config.maxConnectionsPerAddress, 1024)
    assert.equal(loadConfig({ MAX_CONNECTIONS: '300' }).maxConnections, 300)
    assert.throws(() => loadConfig({ MAX_CONNECTIONS: 'many' }), ConfigError)
    assert.throws(() => loadConfig({ MAX_CONNECTIONS_PER_ADDRESS: '-1' }), /MAX_CONNECTIONS_PER_ADDRESS/)
    assert.throws(() => loadConfig({ AUTH_FAILURE_LIMIT: '1.5' }), /AUTH_FAILURE_LIMIT/)
    assert.throws(() => loadConfig({ LINGER_BYTES: 'lots' }), /LINGER_BYTES/)
  })

  it('counts a client address as the failed-auth limit does: IPv6 by /64, IPv4-mapped as IPv4', () => {
    assert.equal(addressKey('2001:db8:1:2:aaaa::1'), addressKey('2001:db8:1:2:ffff:ffff:ffff:ffff'))
    assert.notEqual(addressKey('2001:db8:1:2::1'), addressKey('2001:db8:1:3::1'))
    assert.equal(addressKey('::ffff:192.0.2.7'), '192.0.2.7')
    assert.equal(addressKey('192.0.2.7'), '192.0.2.7')
    assert.notEqual(addressKey('192.0.2.7'), addressKey('192.0.2.8'))
  })
})
