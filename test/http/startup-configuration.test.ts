/**
 * A wrong setting stops `plant-store serve` before it listens: exit 1, one line naming the
 * variable, no stack trace. Apart from lifecycle.test.ts so that the two run side by side.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { runCli } from '../helpers.js'

describe('configuration', () => {
  const folder = mkdtempSync(path.join(os.tmpdir(), 'plant-store-config-'))
  after(() => rmSync(folder, { recursive: true, force: true }))
  const unopenable = path.join(folder, 'not-a-database.db')
  writeFileSync(unopenable, 'this is not SQLite, just text long enough to have a header')
  for (const [name, value] of [
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['LOG_LEVEL', 'loud'],
    ['BODY_LIMIT', 'big'],
    ['DATABASE_URL', 'mysql://x'],
    ['DATABASE_URL', ''],
    ['DATABASE_URL', '  '],
    ['DATABASE_URL', 'postgres://u@127.0.0.1:1/db?sslmode=bogus'],
    ['DATABASE_URL', 'postgres://u@[::1]:1/db'],
    ['DATABASE_URL', 'postgres://postgres@127.0.0.1:99999/x'],
    ['DATABASE_URL', 'postgres://postgres@127.0.0.1:0/x'],
    ['REQUEST_TIMEOUT_MS', '2000'],
    ['WEBHOOK_BACKOFF_BASE_MS', '86400000'],
    ['DB_STATEMENT_TIMEOUT_MS', '99'],
    ['SQLITE_SYNC', 'sometimes'],
    ['LINGER_BYTES', '65MiB'],
    ['OTEL_SDK_DISABLED', 'maybe'],
    ['WEBHOOK_LEASE_MS', '5000'],
    ['TOKEN_CACHE_MS', '5000'],
    ['HOST', 'not-a-host..'],
    ['TRUST_PROXY', 'nginx'],
    ['TRUST_PROXY', '10.0.0.0/33'],
    ['PLANT_STORE_DB', folder],
    ['PLANT_STORE_DB', unopenable],
    ['PLANT_STORE_DB', '/proc/plant-store-nope/x.db'],
    ['PLANT_STORE_DB', ':memory:'],
    ['PLANT_STORE_DB', 'file:plants.db?mode=memory'],
  ] as const) {
    it(`stops startup on ${name}=${JSON.stringify(value)} with one line naming ${name}`, async () => {
      const env = { PLANT_STORE_DB: path.join(folder, 'never-created/x.db'), PORT: '0', [name]: value }
      const result = await runCli(['serve'], env)
      assert.equal(result.code, 1, result.stderr)
      assert.match(result.stderr, new RegExp(name))
      assert.doesNotMatch(result.stderr, /\n[ \t]+at /, 'no stack trace')
    })
  }

  it('takes a DATABASE_URL with spaces around it like any other setting', async () => {
    for (const value of [
      ' postgres://nobody@127.0.0.1:1/nowhere',
      'postgres://nobody@127.0.0.1:1/nowhere ',
    ]) {
      const result = await runCli(['serve'], { DATABASE_URL: value, PORT: '0' })
      assert.equal(result.code, 1, result.stderr)
      assert.match(result.stderr, /DATABASE_URL/)
      assert.doesNotMatch(result.stderr, /must start with/, JSON.stringify(value))
    }
  })

  it('says a DATABASE_URL port is out of range rather than blaming the password', async () => {
    const env = { DATABASE_URL: 'postgres://postgres@127.0.0.1:99999/x', PORT: '0' }
    const result = await runCli(['serve'], env)
    assert.match(result.stderr, /DATABASE_URL port must be between 1 and 65535, got 99999/)
  })
})
