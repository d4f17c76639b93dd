import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Ajv } from 'ajv'
import { ConfigError, loadConfig } from '../../src/config.js'
import { ENV_ANNOTATIONS, ENV_SCHEMA, ENV_VARIABLES } from '../../src/config/env-schema.js'
import { breaksRule } from '../../src/config/read-env.js'
import { readerOf } from '../../src/config/text-readers.js'

/** Ajv in strict mode, checking the schema against the draft-07 meta-schema too. */
function strictAjv(): Ajv {
  const ajv = new Ajv({ strict: true, allowUnionTypes: true, validateSchema: true })
  ajv.addVocabulary(ENV_ANNOTATIONS)
  return ajv
}

describe('src/config/env-schema.ts', () => {
  it('is a JSON Schema that Ajv compiles in strict mode, and every default passes it', () => {
    const validate = strictAjv().compile(ENV_SCHEMA)
    const defaults = Object.fromEntries(ENV_VARIABLES.map(([name, variable]) => [name, variable.default]))
    assert.ok(validate(defaults), JSON.stringify(validate.errors))
  })

  it("judges each variable's bounds and words as Ajv does (loadConfig checks them without compiling)", () => {
    const ajv = strictAjv()
    let judged = 0
    for (const [name, variable] of ENV_VARIABLES) {
      const validate = ajv.compile(variable)
      const candidates: unknown[] = [variable.default]
      if (variable.minimum !== undefined) candidates.push(variable.minimum - 1, variable.minimum)
      if (variable.maximum !== undefined) candidates.push(variable.maximum, variable.maximum + 1)
      if (variable.enum) candidates.push(...variable.enum, 'none-of-them')
      for (const value of candidates.filter((candidate) => candidate !== undefined)) {
        assert.equal(breaksRule(variable, value) === undefined, validate(value), `${name} = ${String(value)}`)
        judged++
      }
    }
    assert.ok(judged > 100, `${judged} judged`)
  })

  it('declares for each variable its docs group, help line and meaning, and a reader that exists', () => {
    for (const [name, variable] of ENV_VARIABLES) {
      assert.match(name, /^[A-Z][A-Z0-9_]*$/)
      assert.ok(['general', 'limits'].includes(variable['x-group']), name)
      assert.ok(variable.title.length > 0 && variable.title.length <= 70, `${name}: a title fits a help line`)
      assert.ok(variable.description.length > 0, name)
      assert.doesNotThrow(() => readerOf(variable), name)
    }
  })

  it('gives every field of Config a value when nothing is set, except those that mean "not set"', () => {
    const config = loadConfig({}, false) as unknown as Record<string, unknown>
    const unset = Object.entries(config).filter(([, value]) => value === undefined)
    assert.deepEqual(unset.map(([key]) => key).sort(), ['databaseReadUrl', 'databaseUrl', 'metricsPort'])
    const keys = ENV_VARIABLES.flatMap(([, variable]) => variable['x-key'] ?? [])
    assert.deepEqual(Object.keys(config).sort(), [...keys, 'tracing'].sort())
  })
})

describe('loadConfig names the variable and the rule', () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ PORT: 'eighty' }, /^PORT must be a whole number, got "eighty"$/],
    [{ PORT: '070000' }, /^PORT must be between 0 and 65535, got 70000$/],
    [{ TOKEN_CACHE_MS: '5000' }, /^TOKEN_CACHE_MS must be between 0 and 1000, got 5000$/],
    [{ BODY_LIMIT: 'big' }, /^BODY_LIMIT must be a size such as 16384, 16KiB or 1MiB, got "big"$/],
    [{ LINGER_BYTES: '65MiB' }, /^LINGER_BYTES must be between 1 byte and 64MiB, got "65MiB"$/],
    [
      { LOG_LEVEL: 'Loud' },
      /^LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "Loud"$/,
    ],
    [{ WEBHOOK_WORKER: 'maybe' }, /^WEBHOOK_WORKER must be true or false, got "maybe"$/],
    [{ DATABASE_URL: ' ' }, /^DATABASE_URL is set but empty: unset it to use the SQLite file/],
    [
      { DATABASE_URL: 'postgres://u@h:99999/x' },
      /^DATABASE_URL port must be between 1 and 65535, got 99999$/,
    ],
    [{ PLANT_STORE_DB: ':memory:' }, /^PLANT_STORE_DB must be a file path/],
    [{ TRUST_PROXY: '10.0.0.0/33' }, /^TRUST_PROXY must be true, false, or a comma-separated list/],
    [{ OTEL_SDK_DISABLED: 'maybe' }, /^OTEL_SDK_DISABLED must be true or false, got "maybe"$/],
    // Cross-variable rules, checked after the schema.
    [{ PORT: '9464', METRICS_PORT: '9464' }, /^METRICS_PORT must differ from PORT \(9464\)/],
    [
      { REQUEST_TIMEOUT_MS: '2000' },
      /^HEADERS_TIMEOUT_MS \(9000\) must not be larger than REQUEST_TIMEOUT_MS \(2000\)/,
    ],
    [
      { WEBHOOK_LEASE_MS: '5000' },
      /^WEBHOOK_LEASE_MS \(5000\) must be larger than WEBHOOK_TIMEOUT_MS \(10000\)/,
    ],
  ]
  for (const [env, message] of cases) {
    it(`${JSON.stringify(env)}`, () => {
      assert.throws(
        () => loadConfig(env, false),
        (error: Error) => error instanceof ConfigError && message.test(error.message),
      )
    })
  }

  it('reads spaces around a value away, words in any case, and blank as the default', () => {
    const config = loadConfig(
      { PORT: ' 8081 ', LOG_LEVEL: 'WARN', BODY_LIMIT: '1 MiB', SQLITE_MAX_BATCH: '  ' },
      false,
    )
    assert.equal(config.port, 8081)
    assert.equal(config.logLevel, 'warn')
    assert.equal(config.bodyLimit, 1024 * 1024)
    assert.equal(config.sqliteMaxBatch, 256)
  })
})
