import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { ConfigError, loadConfig } from '../../src/config.js'
import { isoTime } from '../../src/observability/iso-time.js'
import { storeLocation } from '../../src/observability/store-location.js'

describe('observability settings', () => {
  it('defaults: metrics on at /metrics, no tracing, LOG_FORMAT pretty only on a terminal', () => {
    const plain = loadConfig({}, false)
    assert.equal(plain.metrics, true)
    assert.equal(plain.metricsPort, undefined)
    assert.equal(plain.tracing, false)
    assert.equal(plain.logFormat, 'json')
    assert.equal(loadConfig({}, true).logFormat, 'pretty')
    assert.equal(loadConfig({ LOG_FORMAT: 'json' }, true).logFormat, 'json')
  })

  it('reads METRICS, METRICS_PORT and the OTLP endpoint', () => {
    assert.equal(loadConfig({ METRICS: 'false' }).metrics, false)
    assert.equal(loadConfig({ METRICS_PORT: '9464' }).metricsPort, 9464)
    assert.equal(loadConfig({ METRICS: 'false', METRICS_PORT: '9464' }).metricsPort, undefined)
    assert.equal(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing, true)
    assert.equal(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://c/v1/traces' }).tracing, true)
    const disabled = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }
    assert.equal(loadConfig(disabled).tracing, false)
  })

  it('refuses bad values, naming the variable', () => {
    const refusals: [Record<string, string>, RegExp][] = [
      [{ METRICS: 'maybe' }, /^METRICS must be true or false, got "maybe"$/],
      [{ METRICS_PORT: '70000' }, /^METRICS_PORT must be between 0 and 65535, got 70000$/],
      [{ METRICS_PORT: '8080', PORT: '8080' }, /^METRICS_PORT must differ from PORT \(8080\)/],
      [{ LOG_FORMAT: 'xml' }, /^LOG_FORMAT must be one of json, pretty, got "xml"$/],
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
        /^OTEL_EXPORTER_OTLP_ENDPOINT must be an http:\/\/ or https:\/\/ URL/,
      ],
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'nope' },
        /^OTEL_SDK_DISABLED must be true or false/,
      ],
    ]
    for (const [env, message] of refusals)
      assert.throws(
        () => loadConfig(env),
        (error: Error) => error instanceof ConfigError && message.test(error.message),
      )
  })

  it('writes the time as pino isoTime does', () => {
    const before = Date.now()
    const time = JSON.parse(`{${isoTime().slice(1)}}`).time as string
    const at = Date.parse(time)
    assert.ok(at >= before && at <= Date.now(), time)
    assert.equal(new Date(at).toISOString(), time)
  })

  it('names the PostgreSQL host and database, never the password', () => {
    const { fields, message } = storeLocation({
      databaseUrl: 'postgres://app:s3cr%40t@db.internal:6432/plants?sslmode=require',
      dbPath: '/unused',
    })
    assert.deepEqual(fields, {
      store: 'postgres',
      host: 'db.internal',
      port: '6432',
      database: 'plants',
      user: 'app',
    })
    assert.equal(message, 'store: PostgreSQL database "plants" on db.internal:6432')
    assert.ok(!JSON.stringify({ fields, message }).includes('s3cr'))
    const withReplica = storeLocation({
      databaseUrl: 'postgres://app:s3cr%40t@db.internal:6432/plants',
      databaseReadUrl: 'postgres://app:s3cr%40t@replica.internal/plants',
      dbPath: '/unused',
    })
    assert.equal(
      withReplica.message,
      'store: PostgreSQL database "plants" on db.internal:6432; plant reads from replica.internal:5432 once caught up',
    )
    assert.equal(withReplica.fields.readFrom, 'replica.internal:5432')
    assert.ok(!JSON.stringify(withReplica).includes('s3cr'))
  })
})
