/** Headers every answer carries, a readiness probe that reads the plants, and token names that cannot lie. */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { runCli, serviceEnv, startService, type StoreKind, type TestService, testStores } from '../helpers.js'
import { pgAdmin } from '../pg-admin.js'
import { answerTo, requestBytes } from '../raw-http.js'

/** Renames the plants table behind the service's back, as an operator's mistake would. */
async function renamePlants(store: StoreKind, env: Record<string, string>, from: string, to: string) {
  const statement = `ALTER TABLE ${from} RENAME TO ${to}`
  if (store === 'sqlite') {
    const db = new Database(env.PLANT_STORE_DB as string)
    try {
      db.exec(statement)
    } finally {
      db.close()
    }
    return
  }
  const admin = pgAdmin(env.DATABASE_URL as string)
  try {
    await admin.unsafe(statement)
  } finally {
    await admin.end()
  }
}

for (const store of testStores()) {
  describe(`defence in depth (${store})`, () => {
    let service: TestService
    let token: string
    before(async () => {
      service = await startService(store)
      token = await service.token()
    })
    after(() => service.close())

    const bearer = (): [string, string][] => [['Authorization', `Bearer ${token}`]]
    const json = (body: string): [string, string][] => [
      ['Content-Type', 'application/json'],
      ['Content-Length', String(Buffer.byteLength(body))],
    ]

    it('sends nosniff on every answer, and no-store on every /plants answer', async () => {
      const plants: [string, string, number][] = [
        ['GET /plants', requestBytes('GET', '/plants', bearer()), 200],
        ['HEAD /plants', requestBytes('HEAD', '/plants', bearer()), 200],
        [
          'POST /plants',
          requestBytes(
            'POST',
            '/plants',
            [...bearer(), ...json('{"id":1,"name":"A"}')],
            '{"id":1,"name":"A"}',
          ),
          200,
        ],
        ['GET /plants/404', requestBytes('GET', '/plants/404', bearer()), 404],
        ['GET /plants without a token', requestBytes('GET', '/plants'), 401],
        ['PUT /plants', requestBytes('PUT', '/plants', bearer()), 405],
        ['GET /plants/%ff', requestBytes('GET', '/plants/%ff', bearer()), 400],
        ['POST /plants, bad JSON', requestBytes('POST', '/plants', [...bearer(), ...json('{')], '{'), 400],
        [
          'POST /plants, gzip framing',
          requestBytes('POST', '/plants', [...bearer(), ['Transfer-Encoding', 'gzip, chunked']], '0\r\n\r\n'),
          501,
        ],
        ['CONNECT /plants', requestBytes('CONNECT', '/plants'), 405],
        ['Expect: 417 on /plants', requestBytes('POST', '/plants', [...bearer(), ['Expect', 'teapot']]), 417],
        [
          'POST /plants, a body over the limit',
          requestBytes('POST', '/plants', [
            ...bearer(),
            ['Content-Type', 'application/json'],
            ['Content-Length', '1048576'],
          ]),
          413,
        ],
        ['GET /plants?limit=%zz', requestBytes('GET', '/plants?limit=%zz', bearer()), 400],
        ['GET /plants/{a 101-digit id}', requestBytes('GET', `/plants/${'1'.repeat(101)}`, bearer()), 400],
      ]
      const others: [string, string, number][] = [
        ['GET /healthz', requestBytes('GET', '/healthz'), 200],
        ['GET /openapi.json', requestBytes('GET', '/openapi.json'), 200],
        ['GET /nowhere', requestBytes('GET', '/nowhere'), 404],
        ['HEAD /nowhere', requestBytes('HEAD', '/nowhere'), 404],
        ['a request the parser refuses', 'GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n', 400],
        ['CONNECT elsewhere', requestBytes('CONNECT', 'example.com:443'), 501],
      ]
      for (const [what, bytes, status] of [...plants, ...others]) {
        const answer = await answerTo(service.url, bytes)
        assert.equal(answer.status, status, `${what}: ${answer.body}`)
        assert.deepEqual(answer.headers['x-content-type-options'], ['nosniff'], what)
        const onPlants = plants.some(([name]) => name === what)
        assert.deepEqual(answer.headers['cache-control'], onPlants ? ['no-store'] : undefined, what)
      }
    })

    it('is not ready while the plants table cannot be read, and ready again once it can', async () => {
      const ready = await answerTo(service.url, requestBytes('GET', '/readyz'))
      assert.equal(ready.status, 200, ready.body)
      await renamePlants(store, service.env, 'plants', 'plants_elsewhere')
      try {
        const list = await answerTo(service.url, requestBytes('GET', '/plants', bearer()))
        assert.equal(list.status, 500, 'the plant routes fail meanwhile')
        const notReady = await answerTo(service.url, requestBytes('GET', '/readyz'))
        assert.equal(notReady.status, 503, notReady.body)
        assert.equal(JSON.parse(notReady.body).error, 503)
        assert.deepEqual(notReady.headers['retry-after'], ['5'])
      } finally {
        await renamePlants(store, service.env, 'plants_elsewhere', 'plants')
      }
      assert.equal((await answerTo(service.url, requestBytes('GET', '/readyz'))).status, 200)
      assert.equal((await answerTo(service.url, requestBytes('GET', '/plants', bearer()))).status, 200)
    })

    it('refuses token names with Unicode format characters, as control characters are', async () => {
      const env = await serviceEnv(store)
      for (const name of ['invoice\u202Etxt.exe', 'zero\u200Bwidth', 'isolate\u2066d', 'b\uFEFFom']) {
        const result = await runCli(['tokens', 'create', '--name', name], env)
        assert.equal(result.code, 2, JSON.stringify(name))
        assert.equal(result.stdout, '')
        assert.match(result.stderr, /--name must be .* no control or format characters/)
      }
      const fine = await runCli(['tokens', 'create', '--name', 'Ficus élastique 🌿'], env)
      assert.equal(fine.code, 0, fine.stderr)
    })
  })
}
