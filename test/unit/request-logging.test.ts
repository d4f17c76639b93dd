import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { loggedUrl, requestIdFrom } from '../../src/observability/request-line.js'

const token = `pst_${'a1B2'.repeat(10)}xyz`

describe('what the request log keeps of a URL and a request id', () => {
  it('leaves a URL without a token as it came', () => {
    for (const url of [
      '/plants?limit=5&tag=fern',
      '/plants/42',
      '/plants?tag=%66ern',
      '/plants?tag=%zz',
      `/plants?tag=${'a'.repeat(42)}`,
      undefined,
    ]) {
      assert.equal(loggedUrl(url), url)
    }
  })

  it('hides an access_token value and any token, however the URL spells them', () => {
    const cases: [string, string][] = [
      [`/plants?limit=1&access_token=${token}`, '/plants?limit=1&access_token=[redacted]'],
      [`/plants?access%5Ftoken=x&limit=1`, '/plants?access%5Ftoken=[redacted]&limit=1'],
      [`/plants?ACCESS_TOKEN=x`, '/plants?ACCESS_TOKEN=[redacted]'],
      [`/plants?access%5Ftoken=%70st_${token.slice(4)}`, '/plants?access%5Ftoken=[redacted]'],
      [`/plants?tag=%70%73%74%5F${token.slice(4)}&limit=2`, '/plants?[redacted]&limit=2'],
      [`/plants/${token}?limit=1`, '/plants/[redacted]?limit=1'],
      [`/plants/%70st_${token.slice(4)}`, '/plants/[redacted]'],
      [`/plants?x=%zz&y=${token}`, '/plants?x=%zz&[redacted]'],
      // The secret part alone, however it is introduced.
      [`/plants?tag=${token.slice(4)}`, '/plants?[redacted]'],
      [`/plants?tag=pst+${token.slice(4)}`, '/plants?[redacted]'],
      [`/plants/${token.slice(4)}`, '/plants/[redacted]'],
    ]
    for (const [url, logged] of cases) {
      assert.equal(loggedUrl(url), logged, url)
      assert.ok(!loggedUrl(url)?.includes(token.slice(4)), url)
    }
  })

  it('keeps a plain X-Request-Id, and replaces one holding a token', () => {
    assert.equal(requestIdFrom('trace-42.a:b'), 'trace-42.a:b')
    assert.equal(requestIdFrom(['first', 'second']), 'first')
    for (const value of [
      token,
      token.slice(4),
      `x-${token}`,
      'PST_abc',
      'bad id',
      'x'.repeat(129),
      '',
      undefined,
    ]) {
      const id = requestIdFrom(value)
      assert.match(id, /^[0-9a-f-]{36}$/, String(value))
    }
  })
})
