/** The service's logs as an operator reads them: JSON lines or pino-pretty text, and the start-up lines. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { serviceEnv, spawnService, stopService, testStores } from '../helpers.js'
import { request } from '../http-client.js'

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal']

const jsonLines = (output: string) =>
  output
    .split('\n')
    // stderr's plain notices (a new store) sit beside stdout's JSON lines in the output.
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)

describe('logs', () => {
  for (const store of testStores()) {
    it(`JSON lines carry an ISO time and the level's name; the start says where the store is (${store})`, async () => {
      const env = await serviceEnv(store)
      const service = await spawnService(env)
      const requests = 50
      for (let i = 0; i < requests; i++)
        assert.equal((await request('GET', `${service.url}/healthz`)).status, 200)
      // The request lines written in the last turns before a stop are not lost.
      assert.equal(await stopService(service), 0)
      const lines = jsonLines(service.output())
      for (const line of lines) {
        assert.match(String(line.time), ISO_TIME)
        assert.ok(LEVELS.includes(String(line.level)), String(line.level))
      }
      assert.equal(
        lines.filter((line) => line.msg === 'request' && line.route === '/healthz').length,
        requests,
      )
      assert.ok(
        lines.some((line) => /^Server listening at http:\/\/127\.0\.0\.1:\d+$/.test(String(line.msg))),
      )
      const start = lines.find((line) => String(line.msg).startsWith('store: '))
      assert.ok(start, 'a line says which store')
      if (store === 'sqlite') {
        assert.equal(start.path, env.PLANT_STORE_DB)
        assert.equal(start.msg, `store: SQLite file ${env.PLANT_STORE_DB}`)
      } else {
        const url = new URL(env.DATABASE_URL as string)
        assert.equal(start.host, url.hostname)
        assert.equal(start.port, url.port || '5432')
        assert.equal(start.database, url.pathname.slice(1))
        if (url.password) assert.ok(!service.output().includes(url.password), 'never the password')
      }
    })
  }

  it('warns at start that TRUST_PROXY=true lets a client choose its own address', async () => {
    const warning = (env: Record<string, string>) =>
      spawnService(env).then(async (service) => {
        assert.equal(await stopService(service), 0)
        return jsonLines(service.output()).find((line) => String(line.msg).startsWith('TRUST_PROXY'))
      })
    const any = await warning(await serviceEnv('sqlite', { TRUST_PROXY: 'true' }))
    assert.equal(any?.level, 'warn')
    assert.match(String(any?.msg), /chooses its own address, so the failed-authentication limit/)
    assert.equal(await warning(await serviceEnv('sqlite', { TRUST_PROXY: '127.0.0.1' })), undefined)
  })

  it('LOG_FORMAT=pretty writes pino-pretty text, one line per request, without colour into a pipe', async () => {
    // CI set: colour libraries take it as leave to colour a pipe, which a log file must never get.
    const service = await spawnService(
      await serviceEnv('sqlite', { LOG_FORMAT: 'pretty', CI: 'true', GITHUB_ACTIONS: 'true' }),
    )
    const requests = 5
    for (let i = 0; i < requests; i++)
      assert.equal(
        (await request('GET', `${service.url}/healthz`, { headers: { 'x-request-id': `r${i}` } })).status,
        200,
      )
    assert.equal(await stopService(service), 0)
    const output = service.output()
    assert.match(output, /^\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO: store: SQLite file \//m)
    assert.ok(!output.split('\n').some((line) => line.startsWith('{')), 'no JSON line')
    assert.ok(!output.includes('\u001b['), 'no colour into a pipe')
    // Each request is one line holding what the JSON line holds; nothing of it on lines of its own.
    const lines = output.split('\n').filter((line) => line.includes('/healthz'))
    assert.equal(lines.length, requests, lines.join('\n'))
    for (const [i, line] of lines.entries()) {
      assert.match(
        line,
        new RegExp(
          `^\\[[\\d:.]+\\] INFO: request GET /healthz 200 [\\d.]+ ms .*reqId=r${i}.*client=127\\.0\\.0\\.1.*route=/healthz`,
        ),
      )
    }
    assert.doesNotMatch(output, /^ +(reqId|client|route|status): /m)
  })
})
