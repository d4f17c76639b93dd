/** CORS for browsers: off unless CORS_ORIGINS names origins; preflights on /plants answered then. */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { ConfigError, loadConfig } from '../../src/config.js'
import { startService, type TestService, testStores } from '../helpers.js'
import { answerTo, type RawAnswer, requestBytes } from '../raw-http.js'

const APP = 'https://app.example.com'

const preflight = (path: string, method: string, origin = APP) =>
  requestBytes('OPTIONS', path, [
    ['Origin', origin],
    ['Access-Control-Request-Method', method],
    ['Access-Control-Request-Headers', 'authorization, content-type'],
  ])

const corsHeaders = (answer: RawAnswer) =>
  Object.keys(answer.headers).filter((name) => name.startsWith('access-control-'))

for (const store of testStores()) {
  describe(`CORS with CORS_ORIGINS set (${store})`, () => {
    let service: TestService
    let token: string
    before(async () => {
      service = await startService(store, { CORS_ORIGINS: `${APP}, http://localhost:3000` })
      token = await service.token()
    })
    after(() => service.close())

    it('answers a preflight on /plants and /plants/{id}, allowing Authorization and Content-Type', async () => {
      for (const [path, method] of [
        ['/plants', 'POST'],
        ['/plants', 'GET'],
        ['/plants/42', 'DELETE'],
      ] as const) {
        const answer = await answerTo(service.url, preflight(path, method))
        assert.equal(answer.status, 204, `${path} ${method}: ${answer.body}`)
        assert.deepEqual(answer.headers['access-control-allow-origin'], [APP])
        assert.match(answer.headers['access-control-allow-methods']?.[0] ?? '', new RegExp(`\\b${method}\\b`))
        const allowed = (answer.headers['access-control-allow-headers']?.[0] ?? '').toLowerCase()
        assert.ok(allowed.includes('authorization') && allowed.includes('content-type'), allowed)
        assert.deepEqual(answer.headers['access-control-max-age'], ['600'])
        assert.equal(answer.headers['access-control-allow-credentials'], undefined)
        assert.deepEqual(answer.headers['x-content-type-options'], ['nosniff'])
      }
    })

    it('lets an allowed origin read answers, errors included, and their Link and X-Request-Id', async () => {
      const ok = await answerTo(
        service.url,
        requestBytes('GET', '/plants?limit=1', [
          ['Origin', APP],
          ['Authorization', `Bearer ${token}`],
        ]),
      )
      assert.equal(ok.status, 200)
      assert.deepEqual(ok.headers['access-control-allow-origin'], [APP])
      assert.match(ok.headers['access-control-expose-headers']?.[0] ?? '', /\bLink\b.*\bX-Request-Id\b/)
      const refused = await answerTo(service.url, requestBytes('GET', '/plants', [['Origin', APP]]))
      assert.equal(refused.status, 401)
      assert.deepEqual(refused.headers['access-control-allow-origin'], [APP])
    })

    it('gives another origin no Access-Control-Allow-Origin', async () => {
      const answer = await answerTo(service.url, preflight('/plants', 'POST', 'https://evil.example'))
      assert.equal(answer.headers['access-control-allow-origin'], undefined)
      const read = await answerTo(
        service.url,
        requestBytes('GET', '/plants', [
          ['Origin', 'https://evil.example'],
          ['Authorization', `Bearer ${token}`],
        ]),
      )
      assert.equal(read.status, 200)
      assert.equal(read.headers['access-control-allow-origin'], undefined)
    })

    it('keeps the 405 for an OPTIONS that is no preflight, and for paths other than /plants', async () => {
      const plain = await answerTo(service.url, requestBytes('OPTIONS', '/plants'))
      assert.equal(plain.status, 405)
      assert.deepEqual(plain.headers.allow, ['GET, POST, HEAD'])
      const health = await answerTo(service.url, preflight('/healthz', 'GET'))
      assert.equal(health.status, 405)
      assert.deepEqual(corsHeaders(health), [])
      const nowhere = await answerTo(service.url, preflight('/nowhere', 'GET'))
      assert.equal(nowhere.status, 404)
      assert.equal(JSON.parse(nowhere.body).error, 404)
    })
  })

  describe(`CORS with CORS_ORIGINS unset (${store})`, () => {
    let service: TestService
    let token: string
    before(async () => {
      service = await startService(store)
      token = await service.token()
    })
    after(() => service.close())

    it('sends no CORS header and answers OPTIONS 405 as before', async () => {
      const answer = await answerTo(service.url, preflight('/plants', 'POST'))
      assert.equal(answer.status, 405)
      assert.deepEqual(corsHeaders(answer), [])
      const read = await answerTo(
        service.url,
        requestBytes('GET', '/plants', [
          ['Origin', APP],
          ['Authorization', `Bearer ${token}`],
        ]),
      )
      assert.equal(read.status, 200)
      assert.deepEqual(corsHeaders(read), [])
    })
  })
}

describe('CORS_ORIGINS', () => {
  it('takes * or a list of origins, and refuses anything else naming the variable', () => {
    assert.deepEqual(loadConfig({ CORS_ORIGINS: '*' }).corsOrigins, ['*'])
    assert.deepEqual(
      loadConfig({ CORS_ORIGINS: ' https://a.example , http://localhost:3000 ' }).corsOrigins,
      ['https://a.example', 'http://localhost:3000'],
    )
    assert.deepEqual(loadConfig({}).corsOrigins, [])
    for (const bad of [
      'https://a.example/',
      'https://a.example/app',
      'a.example',
      'ftp://a.example',
      '*, https://a.example',
    ]) {
      assert.throws(
        () => loadConfig({ CORS_ORIGINS: bad }),
        (error: Error) => {
          assert.ok(error instanceof ConfigError)
          assert.match(error.message, /^CORS_ORIGINS must be/)
          return true
        },
      )
    }
  })
})
