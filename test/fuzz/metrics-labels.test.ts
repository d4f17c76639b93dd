/**
 * Fuzz: a flood of anonymous odd requests (any method Node accepts, any path, no Host, framing the
 * service refuses) must not add series to /metrics: each family keeps at most LABEL_SETS label sets.
 */
import assert from 'node:assert/strict'
import { METHODS } from 'node:http'
import { after, before, describe, it } from 'node:test'
import fc from 'fast-check'
import { startService, type TestService, testStores } from '../helpers.js'
import { request } from '../http-client.js'
import { fuzz, sendRaw } from './fuzz-harness.js'

/** The bound docs/observability.md gives: label sets of any one family after any anonymous flood. */
const LABEL_SETS = 64
const CASES = 60
const PER_CASE = 50
const AT_ONCE = 25

const method = fc.oneof(
  fc.constantFrom(...METHODS.filter((name) => name !== 'CONNECT')),
  fc.stringMatching(/^[A-Z]{1,12}$/),
)
const target = fc.oneof(
  fc.constantFrom(
    '/plants',
    '/plants/1',
    '/plants/',
    '/healthz',
    '/readyz',
    '/openapi.json',
    '/metrics',
    '/',
    '*',
  ),
  fc.webPath().map((path) => path || '/'),
  fc.webPath().map((path) => `/plants/${encodeURIComponent(path)}`),
)
/** Header lines, the Host line among them only when `host` is set. */
const oddHeaders = fc.record({
  host: fc.constantFrom('Host: x', 'Host: a b', 'Host: x:99999', null),
  framing: fc.constantFrom(
    'Transfer-Encoding: gzip',
    'Transfer-Encoding: chunked',
    'Content-Length: 0',
    null,
  ),
  expect: fc.constantFrom('Expect: nonsense', 'Expect: 100-continue', null),
  auth: fc.constantFrom('Authorization: Basic eDp5', 'Authorization: Bearer pst_nope', null),
  version: fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/2.0'),
})
const oddRequest = fc.tuple(method, target, oddHeaders).map(([name, path, headers]) => {
  const lines = [headers.host, headers.framing, headers.expect, headers.auth, 'Connection: close']
  const chunked = headers.framing === 'Transfer-Encoding: chunked' ? '0\r\n\r\n' : ''
  const head = `${name} ${path} ${headers.version}\r\n${lines.filter((line) => line).join('\r\n')}\r\n\r\n`
  return { bytes: head + chunked, head: name === 'HEAD' }
})

/** Label sets per family in the exposition text: a histogram's buckets of one set count once. */
function labelSets(text: string): Map<string, Set<string>> {
  const families = new Map<string, Set<string>>()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = /^([a-zA-Z_:][\w:]*?)(?:_bucket|_sum|_count)?(\{.*\})? /.exec(line)
    assert.ok(match, `a sample line: ${line}`)
    const labels = (match[2] ?? '').replace(/le="[^"]*",?/, '')
    const family = families.get(match[1] as string) ?? new Set<string>()
    family.add(labels)
    families.set(match[1] as string, family)
  }
  return families
}

for (const store of testStores()) {
  describe(`fuzz: label inflation through /metrics (${store})`, () => {
    let service: TestService
    let scraper: string
    before(async () => {
      service = await startService(store, {
        HEADERS_TIMEOUT_MS: '3000',
        REQUEST_TIMEOUT_MS: '3000',
        LOG_LEVEL: process.env.FUZZ_LOG_LEVEL ?? 'silent',
        METRICS_RATE_LIMIT: '0',
        // The flood is anonymous: its failed authentications must not turn into 429s midway.
        AUTH_FAILURE_LIMIT: '0',
      })
      scraper = await service.token(['metrics:read'])
    })
    after(() => service.close())

    it(`keeps every family under ${LABEL_SETS} label sets after ${CASES * PER_CASE} odd anonymous requests`, async (t) => {
      const scrape = async () => {
        const answer = await request('GET', `${service.url}/metrics`, { token: scraper })
        assert.equal(answer.status, 200, answer.text)
        return answer.text
      }
      const quiet = await scrape()
      await fuzz(
        t,
        fc.array(oddRequest, { minLength: PER_CASE, maxLength: PER_CASE }),
        CASES,
        async (requests) => {
          for (let i = 0; i < requests.length; i += AT_ONCE) {
            await Promise.all(
              requests
                .slice(i, i + AT_ONCE)
                .map(({ bytes, head }) =>
                  sendRaw(service.url, bytes, JSON.stringify(bytes.slice(0, 200)), head ? 1 : 0),
                ),
            )
          }
        },
        async () => {},
      )
      const flooded = await scrape()
      for (const [family, sets] of labelSets(flooded)) {
        assert.ok(sets.size <= LABEL_SETS, `${family}: ${sets.size} label sets: ${[...sets].join(' ')}`)
      }
      const requests = labelSets(flooded).get('plant_store_http_requests_total') ?? new Set()
      t.diagnostic(
        `http_requests_total label sets: ${requests.size}; scrape ${quiet.length} bytes before, ${flooded.length} after`,
      )
      for (const labels of requests) assert.match(labels, /method="(GET|HEAD|POST|DELETE|OPTIONS|other)"/)
    })
  })
}
