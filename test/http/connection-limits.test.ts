import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, it } from 'node:test'
import { ConfigError, loadConfig } from '../../src/config.js'
import { defaultMaxConnections, openFileLimit } from '../../src/http/connection-limits.js'
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

    it('closes the 5th to 7th idle connections from one address unread, and serves the first 4', async () => {
      const allowed = await Promise.all(Array.from({ length: 4 }, () => connect(service.url)))
      const before = refusals.length
      const extra = await Promise.all(Array.from({ length: 3 }, () => connect(service.url)))
      for (const client of extra) {
        client.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
        await waitFor('the extra connection to be closed', () => client.closed())
        assert.equal(client.received(), '')
      }
      assert.deepEqual(refusals.slice(before), Array(3).fill('connections-per-address'))
      for (const client of allowed) await healthzOn(client)
      assert.ok(allowed.every((client) => !client.closed()))
      // A closed connection frees its place.
      allowed[0]?.socket.destroy()
      await waitFor('the server to see the close', async () => {
        const next = await connect(service.url)
        await new Promise((resolve) => setTimeout(resolve, 50))
        const open = !next.closed()
        if (open) await healthzOn(next)
        next.socket.destroy()
        return open
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

    it('closes connections past the cap, and fetch still gets answers once one is free', async () => {
      const open = await Promise.all(Array.from({ length: 5 }, () => connect(service.url)))
      const before = refusals.length
      const sixth = await connect(service.url)
      await waitFor('the sixth connection to be closed', () => sixth.closed())
      assert.equal(sixth.received(), '')
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

  it('derives the default cap from the open-file limit, leaving a tenth (at least 64) for the rest', () => {
    const limits = (soft: string) =>
      `Limit                     Soft Limit           Hard Limit           Units\nMax open files            ${soft}                 1048576              files\n`
    assert.equal(openFileLimit(limits('1024')), 1024)
    assert.equal(defaultMaxConnections(limits('1024')), 922)
    assert.equal(defaultMaxConnections(limits('20000')), 18_000)
    assert.equal(defaultMaxConnections(limits('256')), 192)
    assert.equal(defaultMaxConnections('no such line'), 922, 'an unreadable limit is taken as 1024')
    assert.equal(loadConfig({}).maxConnections, defaultMaxConnections())
    assert.equal(loadConfig({ MAX_CONNECTIONS: '300' }).maxConnections, 300)
    assert.throws(() => loadConfig({ MAX_CONNECTIONS: 'many' }), ConfigError)
    assert.throws(() => loadConfig({ MAX_CONNECTIONS_PER_ADDRESS: '-1' }), /MAX_CONNECTIONS_PER_ADDRESS/)
    assert.throws(() => loadConfig({ AUTH_FAILURE_LIMIT: '1.5' }), /AUTH_FAILURE_LIMIT/)
    assert.throws(() => loadConfig({ LINGER_BYTES: 'lots' }), /LINGER_BYTES/)
  })
})
