import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConfigError, loadConfig } from '../../src/config.js'
import { storeLocation } from '../../src/observability/store-location.js'
import { parseHostList } from '../../src/config/postgres-host-list.js'

describe('DATABASE_URL host lists (libpq form)', () => {
  it('splits a host list into one URL per host, in order, without target_session_attrs', () => {
    const list = parseHostList(
      'postgres://u:p%40ss@h1:5433,[::1],h3:6000/db?target_session_attrs=read-write&sslmode=disable',
      'DATABASE_URL',
    )
    assert.deepEqual(list.hosts, ['h1:5433', '[::1]:5432', 'h3:6000'])
    assert.equal(list.targetSessionAttrs, 'read-write')
    assert.deepEqual(list.urls, [
      'postgres://u:p%40ss@h1:5433/db?sslmode=disable',
      'postgres://u:p%40ss@[::1]:5432/db?sslmode=disable',
      'postgres://u:p%40ss@h3:6000/db?sslmode=disable',
    ])
  })

  it('reads one host as before, with target_session_attrs any when absent', () => {
    const list = parseHostList('postgresql://u@db.internal/plants', 'DATABASE_URL')
    assert.deepEqual(list.urls, ['postgresql://u@db.internal:5432/plants'])
    assert.equal(list.targetSessionAttrs, 'any')
  })

  it("keeps libpq's default host (postgres:///db?host=/run/postgresql) and names a list in the start-up line", () => {
    assert.deepEqual(parseHostList('postgres:///db?host=/run/postgresql', 'DATABASE_URL').urls, [
      'postgres:///db?host=%2Frun%2Fpostgresql',
    ])
    const listed = storeLocation({
      databaseUrl: 'postgres://u@h1:5433,h2/db?target_session_attrs=primary',
      dbPath: '',
    })
    assert.equal(
      listed.message,
      'store: PostgreSQL database "db" on h1:5433,h2:5432 (target_session_attrs=primary)',
    )
    assert.equal(listed.fields.host, 'h1:5433,h2:5432')
  })

  it('takes every libpq target_session_attrs value', () => {
    for (const attrs of ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby']) {
      const env = { DATABASE_URL: `postgres://u@h1,h2/db?target_session_attrs=${attrs}` }
      assert.equal(loadConfig(env).databaseUrl, env.DATABASE_URL)
    }
  })

  it('refuses a bad host list with a message naming the host, its place and the rule', () => {
    const refusals: [string, RegExp][] = [
      [
        'postgres://u@h1:5432,h2:70000/db',
        /^DATABASE_URL host 2 port must be between 1 and 65535, got 70000$/,
      ],
      ['postgres://u@h1:5432,h2:0/db', /^DATABASE_URL host 2 port must be between 1 and 65535, got 0$/],
      ['postgres://u@h1:5432,h2:/db', /^DATABASE_URL host 2 port must be between 1 and 65535, got nothing$/],
      ['postgres://u@h1,,h3/db', /^DATABASE_URL host 2 must be a host name or address, got ""$/],
      [
        'postgres://u@h1:5432:1,h2/db',
        /^DATABASE_URL host 1 must be a host name or address, got "h1:5432:1"$/,
      ],
      ['postgres://u:p@ss@h1/db', /^DATABASE_URL is not a valid URL \(percent-encode special characters/],
      ['postgres://u@h1:99999/db', /^DATABASE_URL port must be between 1 and 65535, got 99999$/],
      [
        'postgres://u@h1,h2/db?target_session_attrs=master',
        /^DATABASE_URL target_session_attrs must be one of any, read-write, read-only, primary, standby, prefer-standby; got "master"$/,
      ],
      ['postgres://u@h1,h2/db?sslmode=strict', /^DATABASE_URL sslmode must be one of disable, /],
    ]
    for (const [url, message] of refusals) {
      assert.throws(
        () => loadConfig({ DATABASE_URL: url }),
        (error: unknown) => error instanceof ConfigError && message.test(error.message),
        url,
      )
    }
  })
})
