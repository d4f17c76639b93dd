import path from 'node:path'
import { getHeapStatistics } from 'node:v8'
import type { FromSchema, JSONSchema } from 'json-schema-to-ts'
import { ENV_VARIABLES, type EnvVariables } from './config/env-schema.js'
import { readEnv } from './config/read-env.js'
import { ConfigError } from './config/text-readers.js'
import { descriptorBudget } from './descriptor-budget.js'

export { ConfigError }

type Env = Record<string, string | undefined>

/** A variable's value: optional unless it has a default, given or computed at start. */
type ValueOf<V extends JSONSchema> = V extends { default: unknown } | { 'x-default': string }
  ? FromSchema<V>
  : FromSchema<V> | undefined

type KeyOf<V> = V extends { 'x-key': infer K extends string } ? K : never

/**
 * Every setting the service reads from the environment: a field per variable of
 * src/config/env-schema.ts that has an `x-key` (its meaning, default and rule are there), and
 * `tracing`, derived. `loadConfig` is the only reader.
 */
export type Config = {
  -readonly [N in keyof EnvVariables as KeyOf<EnvVariables[N]>]: ValueOf<EnvVariables[N]>
} & {
  /**
   * True when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) names an http(s) URL and
   * `OTEL_SDK_DISABLED` is not true: only then is the OpenTelemetry SDK loaded. The SDK reads every
   * other `OTEL_*` variable itself.
   */
  tracing: boolean
}

/** Shedding begins at 90% of the heap V8 may grow to, before an out-of-memory crash would. */
const defaultHeapMb = () => Math.floor((getHeapStatistics().heap_size_limit * 0.9) / (1024 * 1024))

/**
 * Reads and checks the environment; throws a ConfigError naming the first bad variable.
 * `terminal` (whether stdout is one) only picks LOG_FORMAT's default.
 */
export function loadConfig(env: Env = process.env, terminal = process.stdout.isTTY === true): Config {
  const values = readEnv(env)
  const fields: Record<string, unknown> = {}
  for (const [name, variable] of ENV_VARIABLES) {
    if (variable['x-key'] !== undefined) fields[variable['x-key']] = values[name]
  }
  // The fields with a computed default (an `x-default` and no `default`) are set below.
  const config = fields as Config
  config.dbPath = path.resolve(config.dbPath)
  config.logFormat ??= terminal ? 'pretty' : 'json'
  config.loadShedHeapMb ??= defaultHeapMb()
  // Tracing is on when an OTLP endpoint is given, unless the SDK is switched off (the spec's rule).
  const endpoint = values.OTEL_EXPORTER_OTLP_ENDPOINT ?? values.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
  config.tracing = endpoint !== undefined && values.OTEL_SDK_DISABLED !== true
  if (!config.metrics) config.metricsPort = undefined
  else if (config.metricsPort !== undefined && config.metricsPort !== 0 && config.metricsPort === config.port)
    throw new ConfigError(
      `METRICS_PORT must differ from PORT (${config.port}): it serves metrics apart from the API`,
    )
  // Replicas are PostgreSQL's; the SQLite file has none, and a read pool takes half the connections.
  if (config.databaseReadUrl !== undefined && config.databaseUrl === undefined) {
    throw new ConfigError(
      'DATABASE_READ_URL needs DATABASE_URL: reads from a replica are for PostgreSQL, and the SQLite store (PLANT_STORE_DB) has none; unset DATABASE_READ_URL or set DATABASE_URL',
    )
  }
  if (config.databaseReadUrl !== undefined && config.dbPoolSize < 2) {
    throw new ConfigError(
      `DB_POOL_SIZE must be at least 2 with DATABASE_READ_URL (it is split between the primary and the read pool), got ${config.dbPoolSize}`,
    )
  }
  // From the budget of the settings above.
  config.maxConnections ??= descriptorBudget(config).maxConnections
  // Node enforces a request timeout only when it is at least the headers timeout (its own rule,
  // checked only when both are passed to createServer, which Fastify does not do): a probe's body
  // trickled for 5 s under REQUEST_TIMEOUT_MS=2000 with the default 9 s headers timeout.
  if (config.headersTimeoutMs > config.requestTimeoutMs) {
    throw new ConfigError(
      `HEADERS_TIMEOUT_MS (${config.headersTimeoutMs}) must not be larger than REQUEST_TIMEOUT_MS (${config.requestTimeoutMs}); lower it too`,
    )
  }
  if (config.webhookBackoffBaseMs > config.webhookBackoffMaxMs) {
    throw new ConfigError(
      `WEBHOOK_BACKOFF_BASE_MS (${config.webhookBackoffBaseMs}) must not be larger than WEBHOOK_BACKOFF_MAX_MS (${config.webhookBackoffMaxMs})`,
    )
  }
  // A lease shorter than a send would let another claim (even this worker's) resend it meanwhile.
  if (config.webhookLeaseMs <= config.webhookTimeoutMs) {
    throw new ConfigError(
      `WEBHOOK_LEASE_MS (${config.webhookLeaseMs}) must be larger than WEBHOOK_TIMEOUT_MS (${config.webhookTimeoutMs})`,
    )
  }
  return config
}
