import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { parseAuthorization } from '../../src/auth/bearer-auth.js'

/** Whitespace shapes that made the old pattern backtrack: long runs between, before and after. */
const run = 1024 * 1024
const shapes: [string, { scheme: string; rest: string }][] = [
  [`Bearer x${' '.repeat(run)}y`, { scheme: 'Bearer', rest: `x${' '.repeat(run)}y` }],
  [`Bearer x${' \t'.repeat(run / 2)}`, { scheme: 'Bearer', rest: 'x' }],
  [`${' '.repeat(run)}Bearer x`, { scheme: 'Bearer', rest: 'x' }],
  [`Bearer${' '.repeat(run)}`, { scheme: 'Bearer', rest: '' }],
  [`Bearer ${'x '.repeat(run / 2)}`, { scheme: 'Bearer', rest: `${'x '.repeat(run / 2)}`.trimEnd() }],
  [`${'\t'.repeat(run)}`, { scheme: '', rest: '' }],
]

describe('the Authorization parser on hostile whitespace', () => {
  // Each case is 1 MiB: the old pattern needed hours for one; a linear scan needs milliseconds.
  it('splits scheme and token on 1 MiB runs of SP and HTAB in one pass', { timeout: 60_000 }, () => {
    for (const [header, expected] of shapes) assert.deepEqual(parseAuthorization(header), expected)
  })

  it('trims only SP and HTAB, never other spaces', () => {
    assert.deepEqual(parseAuthorization('\u00a0Bearer\u00a0x'), { scheme: '\u00a0Bearer\u00a0x', rest: '' })
    assert.deepEqual(parseAuthorization(' bearer \t tok \t'), { scheme: 'bearer', rest: 'tok' })
  })
})
