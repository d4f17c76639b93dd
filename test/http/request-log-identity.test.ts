/** Every request log line says who: the client's address and the token's id, never its secret. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { runCli, stopService, testStores, startServiceProcess } from '../helpers.js'
import { rawRequest } from '../http-client.js'
import { exchange, requestBytes } from '../raw-http.js'

interface Line {
  msg?: string
  reqId?: string
  client?: string
  tokenId?: string | null
  status?: number
}

const linesOf = (output: string): Line[] =>
  output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Line)

for (const store of testStores()) {
  describe(`request log identity (${store})`, () => {
    for (const trusted of [false, true]) {
      it(`logs the client address${trusted ? ' from X-Forwarded-For with TRUST_PROXY' : ', ignoring X-Forwarded-For without TRUST_PROXY'} and the token id`, async () => {
        const {
          env,
          token: secret,
          service,
        } = await startServiceProcess(store, {
          env: trusted ? { TRUST_PROXY: '127.0.0.1' } : {},
          name: 'log-identity',
        })
        const [listed] = JSON.parse((await runCli(['tokens', 'list', '--json'], env)).stdout) as {
          id: string
        }[]
        const forwarded = { 'x-forwarded-for': '203.0.113.7' }
        try {
          const ok = await rawRequest(`${service.url}/plants`, 'GET', {
            ...forwarded,
            authorization: `Bearer ${secret}`,
            'x-request-id': 'who-ok',
          })
          assert.equal(ok.status, 200)
          const denied = await rawRequest(`${service.url}/plants`, 'GET', {
            ...forwarded,
            authorization: 'Bearer nope',
            'x-request-id': 'who-denied',
          })
          assert.equal(denied.status, 401)
          // Answered outside Fastify's routes: CONNECT, and a path the router cannot decode.
          await exchange(
            service.url,
            requestBytes('CONNECT', '/plants', [
              ['X-Request-Id', 'who-connect'],
              ['X-Forwarded-For', '203.0.113.7'],
            ]),
          )
          const undecodable = await rawRequest(`${service.url}/plants/%ff`, 'GET', {
            ...forwarded,
            'x-request-id': 'who-undecodable',
          })
          assert.equal(undecodable.status, 400)
        } finally {
          await stopService(service)
        }
        const client = trusted ? '203.0.113.7' : '127.0.0.1'
        const lines = linesOf(service.output())
        const line = (reqId: string) => lines.find((l) => l.msg === 'request' && l.reqId === reqId)
        assert.deepEqual(
          [line('who-ok')?.client, line('who-ok')?.tokenId, line('who-ok')?.status],
          [client, listed?.id, 200],
        )
        assert.deepEqual([line('who-denied')?.client, line('who-denied')?.tokenId], [client, null])
        assert.equal(line('who-connect')?.client, client)
        assert.equal(line('who-undecodable')?.client, client)
        assert.ok(!service.output().includes(secret), 'the secret reached the log')
        assert.ok(!service.output().includes(secret.slice(4)), 'the secret part reached the log')
      })
    }
  })
}
