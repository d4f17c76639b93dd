import assert from 'node:assert/strict'
import { readFileSync, rmSync } from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  type SpawnedService,
  spawnService,
  startService,
  tempDir,
  type TestService,
  testStores,
} from '../helpers.js'
import { request } from '../http-client.js'

const REALM = 'Bearer realm="plant-store"'

for (const store of testStores()) {
  describe(`bearer authentication (${store})`, () => {
    let service: TestService
    let token: string
    before(async () => {
      service = await startService(store)
      token = await service.token()
    })
    after(() => service.close())

    const operations = [
      ['POST', '/plants'],
      ['GET', '/plants'],
      ['GET', '/plants/1'],
      ['DELETE', '/plants/1'],
    ] as const

    for (const [method, path] of operations) {
      it(`${method} ${path} without credentials is 401 with a Bearer challenge`, async () => {
        const response = await request(method, `${service.url}${path}`, {
          body: method === 'POST' ? { id: 1, name: 'x' } : undefined,
        })
        assert.equal(response.status, 401)
        assert.equal(response.headers.get('www-authenticate'), REALM)
        assert.equal(response.json.error, 401)
        assert.match(response.json.message, /Authorization/)
      })
    }

    it('answers "Bearer" with no token like no credentials, and two tokens as malformed', async () => {
      const empty = await request('GET', `${service.url}/plants/1`, { authorization: 'Bearer' })
      assert.equal(empty.status, 401)
      assert.equal(empty.headers.get('www-authenticate'), REALM, 'no error code when no token was sent')
      assert.match(empty.json.message, /token after "Bearer"/)
      const two = await request('GET', `${service.url}/plants/1`, {
        authorization: `Bearer ${token} ${token}`,
      })
      assert.equal(two.status, 401)
      assert.equal(
        two.headers.get('www-authenticate'),
        `${REALM}, error="invalid_token", error_description="malformed token"`,
      )
    })

    it('answers a secret that was never issued (any shape, any length) 401 invalid_token', async () => {
      for (const secret of ['pst_short', `pst_${'x'.repeat(15_000)}`, token.toUpperCase(), `${token}=`]) {
        const response = await request('GET', `${service.url}/plants/1`, {
          authorization: `Bearer ${secret}`,
        })
        assert.equal(response.status, 401, secret.slice(0, 20))
        assert.equal(response.json.message, 'bearer token is not recognised')
        assert.match(response.headers.get('www-authenticate') ?? '', /error="invalid_token"/)
      }
    })

    it('rejects another scheme with 401', async () => {
      const response = await request('GET', `${service.url}/plants/1`, {
        authorization: `Basic ${btoa('a:b')}`,
      })
      assert.equal(response.status, 401)
      assert.equal(response.headers.get('www-authenticate'), REALM)
      assert.match(response.json.message, /Bearer/)
    })

    it('separates scheme and token by spaces and tabs only, not by other Unicode spaces', async () => {
      for (const [value, status] of [
        [`Bearer\t${token}`, 404],
        [`Bearer   ${token}  `, 404],
        [`Bearer\u00a0${token}`, 401],
        [`Bearer ${token}\u00a0`, 401],
      ] as const) {
        const response = await request('GET', `${service.url}/plants/404404`, { authorization: value })
        assert.equal(response.status, status, JSON.stringify(value))
      }
    })

    it('accepts the scheme name in any case', async () => {
      for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
        const response = await request('GET', `${service.url}/plants/1`, {
          authorization: `${scheme} ${token}`,
        })
        assert.equal(response.status, 404, scheme)
      }
    })

    for (const [label, value] of [
      ['an unknown token', 'Bearer pst_unknownunknownunknownunknownunknown123'],
      ['an empty token', 'Bearer '],
      ['two tokens', 'Bearer a b'],
    ] as const) {
      it(`rejects ${label} with 401 and error="invalid_token"`, async () => {
        const response = await request('GET', `${service.url}/plants/1`, { authorization: value })
        assert.equal(response.status, 401)
        const challenge = response.headers.get('www-authenticate') ?? ''
        assert.ok(challenge.startsWith(REALM), challenge)
        if (label !== 'an empty token') assert.match(challenge, /error="invalid_token"/)
      })
    }

    it('rejects an expired token with invalid_token', async () => {
      const expired = await service.token(undefined, new Date(Date.now() - 1000))
      const response = await request('GET', `${service.url}/plants/1`, { token: expired })
      assert.equal(response.status, 401)
      assert.match(response.headers.get('www-authenticate') ?? '', /error="invalid_token"/)
      assert.match(response.json.message, /expired/)
    })

    it('stops a token at expiry even while it is cached', async () => {
      const shortLived = await service.token(undefined, new Date(Date.now() + 300))
      assert.equal((await request('GET', `${service.url}/plants/1`, { token: shortLived })).status, 404)
      // Past the token's expiry, while it is still cached: the wait is what is tested.
      await sleep(400)
      assert.equal((await request('GET', `${service.url}/plants/1`, { token: shortLived })).status, 401)
    })

    it('stops a revoked token within one second', async () => {
      const doomed = await service.token()
      assert.equal((await request('GET', `${service.url}/plants/1`, { token: doomed })).status, 404)
      const [record] = (await service.storage.listTokens())
        .filter((t) => t.lastUsedAt !== null || true)
        .slice(-1)
      assert.ok(record)
      assert.equal(await service.storage.revokeToken(record.id), true)
      // Past the one-second bound of the token cache: the wait is what is tested.
      await sleep(1050)
      const response = await request('GET', `${service.url}/plants/1`, { token: doomed })
      assert.equal(response.status, 401)
      assert.match(response.json.message, /revoked/)
    })

    it('answers 403 with insufficient_scope when the scope is missing', async () => {
      const readOnly = await service.token(['plants:read'])
      const response = await request('POST', `${service.url}/plants`, {
        token: readOnly,
        body: { id: 7, name: 'x' },
      })
      assert.equal(response.status, 403)
      assert.equal(response.json.error, 403)
      assert.match(response.headers.get('www-authenticate') ?? '', /error="insufficient_scope"/)
      assert.match(response.json.message, /plants:write/)
      assert.equal((await request('GET', `${service.url}/plants/7`, { token })).status, 404)
      const writeOnly = await service.token(['plants:write'])
      assert.equal((await request('GET', `${service.url}/plants/7`, { token: writeOnly })).status, 403)
      assert.equal((await request('GET', `${service.url}/plants`, { token: writeOnly })).status, 403)
      assert.equal((await request('DELETE', `${service.url}/plants/7`, { token: readOnly })).status, 403)
    })

    it('checks the token before the body: bad body and bad token is 401, not 400 or 415', async () => {
      for (const body of ['{not json', '[]', '']) {
        const response = await request('POST', `${service.url}/plants`, { body, contentType: 'text/plain' })
        assert.equal(response.status, 401)
      }
      const big = await request('POST', `${service.url}/plants`, { body: 'x'.repeat(64 * 1024) })
      assert.equal(big.status, 401)
    })

    it('refuses a token in the query (access_token) with 400 invalid_request, header or not', async () => {
      for (const [method, path, body] of [
        ['GET', '/plants', undefined],
        ['GET', '/plants/41', undefined],
        ['DELETE', '/plants/41', undefined],
        ['POST', '/plants', { id: 41, name: 'in the URL' }],
      ] as const) {
        for (const headerToken of [token, undefined]) {
          const response = await request(method, `${service.url}${path}?access_token=${token}`, {
            token: headerToken,
            body,
          })
          const where = `${method} ${path} with${headerToken ? '' : 'out'} a header`
          assert.equal(response.status, 400, where)
          assert.equal(response.json.code, 'VALIDATION_FAILED', where)
          assert.equal(
            response.json.message,
            'query parameter access_token is not accepted: send the token in the Authorization header',
          )
          assert.deepEqual(
            response.json.details.map((d: { field: string }) => d.field),
            ['access_token'],
          )
          assert.match(
            response.headers.get('www-authenticate') ?? '',
            /^Bearer realm="plant-store", error="invalid_request"/,
          )
        }
      }
      assert.equal(
        (await request('GET', `${service.url}/plants/41`, { token })).status,
        404,
        'nothing stored',
      )
      // Spelt with percent-encoding it is the same parameter.
      const encoded = await request('GET', `${service.url}/plants?access%5Ftoken=x`, { token })
      assert.equal(encoded.status, 400)
    })

    it('leaves the public endpoints open', async () => {
      for (const path of ['/healthz', '/readyz', '/openapi.json']) {
        assert.equal((await request('GET', `${service.url}${path}`)).status, 200, path)
      }
    })
  })
}

describe('memory under a flood of made-up tokens', () => {
  const dir = tempDir('plant-store-token-flood-')
  let service: SpawnedService | undefined
  after(async () => {
    if (service && service.child.exitCode === null) {
      service.child.kill('SIGKILL')
      await service.exited
    }
    rmSync(dir, { recursive: true, force: true })
  })

  const rssMiB = (pid: number) =>
    Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024

  it('does not keep what clients send as tokens: 8,000 distinct 15 KB secrets leave RSS flat', async (t) => {
    // Failures are not rate limited here: this is about what the service keeps of each one.
    service = await spawnService({
      PLANT_STORE_DB: path.join(dir, 'flood.db'),
      PORT: '0',
      LOG_LEVEL: 'warn',
      AUTH_FAILURE_LIMIT: '0',
    })
    const pid = service.child.pid ?? 0
    const agent = new http.Agent({ keepAlive: true, maxSockets: 16 })
    const send = (i: number) =>
      new Promise<number>((resolve, reject) => {
        const secret = `pst_${String(i).padStart(8, '0')}${'x'.repeat(15_000)}`
        http
          .get(
            `${service?.url}/plants/1`,
            { agent, headers: { authorization: `Bearer ${secret}` } },
            (res) => {
              res.resume()
              res.on('end', () => resolve(res.statusCode ?? 0))
            },
          )
          .on('error', reject)
      })
    const statuses = new Set<number>()
    const flood = async (from: number, to: number) => {
      for (let i = from; i < to; i += 16) {
        for (const status of await Promise.all(Array.from({ length: 16 }, (_, k) => send(i + k)))) {
          statuses.add(status)
        }
      }
    }
    // The first 4,000 fill the young generation to the size the garbage collector settles on
    // (some 30 MiB on Node 26, under 10 on Node 20); what follows measures what is kept.
    await flood(0, 4000)
    const before = rssMiB(pid)
    await flood(4000, 12_000)
    agent.destroy()
    const grown = rssMiB(pid) - before
    t.diagnostic(
      `RSS ${before.toFixed(0)} MiB after 4,000 secrets, grew ${grown.toFixed(1)} MiB over 8,000 more (120 MB)`,
    )
    assert.deepEqual([...statuses], [401])
    // Kept, they would be 120 MB; transient garbage stays well under this.
    assert.ok(grown < 50, `RSS grew ${grown.toFixed(1)} MiB`)
  })
})
