import { isIP } from 'node:net'
import path from 'node:path'
import { getHeapStatistics } from 'node:v8'
import { descriptorBudget } from './descriptor-budget.js'
import { parseHostList } from './storage/postgres/host-list.js'

/**
 * Every setting the service reads from the environment, with its default and the rule it must
 * satisfy. The table in docs/configuration.md mirrors this list (a test checks it); `loadConfig` is the only reader.
 */
export interface Config {
  port: number
  host: string
  /** Path of the embedded SQLite file; ignored when `databaseUrl` is set. */
  dbPath: string
  /** `postgres://...`; selects the PostgreSQL store when present. */
  databaseUrl: string | undefined
  dbPoolSize: number
  dbStatementTimeoutMs: number
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'
  bodyLimit: number
  /** A client must have sent all its headers within this time. */
  headersTimeoutMs: number
  /** Whole-request limit, headers and body. */
  requestTimeoutMs: number
  keepAliveTimeoutMs: number
  shutdownTimeoutMs: number
  /** How long a token lookup may be served from memory; bounds how late a revocation bites. */
  tokenCacheMs: number
  /**
   * `SQLITE_SYNC`, SQLite's own `synchronous` level for the writer. `full` (default): a commit
   * returns once SQLite has synced its WAL, so an answered create survives power loss. `normal`:
   * SQLite syncs only at checkpoints, so an answered create survives a crash of the process but
   * the last commits may be lost on power loss. Either way the store cannot be corrupted, and
   * creates are group-committed: those that arrive together share one transaction and one sync.
   */
  sqliteSync: 'full' | 'normal'
  /**
   * `SQLITE_MAX_BATCH`, default 256: most creates one group commit takes. Larger batches amortise
   * an fsync over more requests; smaller ones bound how long the requests in one batch wait.
   */
  sqliteMaxBatch: number
  /**
   * `SQLITE_BUSY_TIMEOUT_MS`, default 5000: how long a write waits for the lock while another
   * process writes the same file, before its whole batch fails with 503.
   */
  sqliteBusyTimeoutMs: number
  webhookTimeoutMs: number
  webhookMaxAttempts: number
  webhookBackoffBaseMs: number
  webhookBackoffMaxMs: number
  webhookPollMs: number
  webhookLeaseMs: number
  /** Run the webhook delivery worker in this process. */
  webhookWorker: boolean
  /**
   * `WEBHOOK_ALLOW_PRIVATE`, default false: deliver to loopback, private, link-local and other
   * non-public addresses too (local receivers, tests). Off, such destinations are refused.
   */
  webhookAllowPrivate: boolean
  /**
   * `CORS_ORIGINS`: the browser origins allowed to call the API, comma-separated (`*` for any).
   * Empty (default): no CORS headers at all.
   */
  corsOrigins: string[]
  /**
   * `TRUST_PROXY`: the proxies whose X-Forwarded-Proto/-Host/-For are believed (for the list's
   * `Link` URL and the logs), as IP addresses or CIDR ranges; `true` trusts any. Default: none.
   */
  trustProxy: boolean | string[]
  /** `METRICS`, default true: serve Prometheus metrics (docs/observability.md). */
  metrics: boolean
  /** `METRICS_PORT`: serve them on HOST:METRICS_PORT only, instead of at GET /metrics on PORT. */
  metricsPort: number | undefined
  /** `METRICS_RATE_LIMIT`, default 60, 0 for none: scrapes of GET /metrics one token may make per window. */
  metricsRateLimit: number
  metricsRateWindowMs: number
  /** `LOG_FORMAT`: JSON lines, or pino-pretty's text; pretty by default only on a terminal. */
  logFormat: 'json' | 'pretty'
  /**
   * True when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) names an http(s) URL and
   * `OTEL_SDK_DISABLED` is not true: only then is the OpenTelemetry SDK loaded. The SDK reads every
   * other `OTEL_*` variable itself.
   */
  tracing: boolean
  /**
   * `MAX_CONNECTIONS`: open connections past which new ones are answered 503 and closed. Default:
   * what the descriptor budget (descriptor-budget.ts) leaves of the process's open-file limit.
   */
  maxConnections: number
  /** `MAX_CONNECTIONS_PER_ADDRESS`, default 1024, 0 for none: open connections one client address (IPv6: /64) may hold. */
  maxConnectionsPerAddress: number
  /** `AUTH_FAILURE_LIMIT`, default 100, 0 for none: failed authentications per address per window. */
  authFailureLimit: number
  authFailureWindowMs: number
  /** `AUTH_FAILURE_CLIENTS`, default 50,000: client addresses the failure limit counts at once. */
  authFailureClients: number
  /** `TOKEN_RATE_LIMIT`, default 0 (none): requests one token may make per window. */
  tokenRateLimit: number
  tokenRateWindowMs: number
  /** `LOAD_SHED_EVENT_LOOP_DELAY_MS`, default 1000, 0 for none: mean event-loop delay past which requests get 503. */
  loadShedEventLoopDelayMs: number
  /** `LOAD_SHED_HEAP_MB`: heap in use past which requests get 503; default 90% of V8's heap limit. */
  loadShedHeapMb: number
  /** `LINGER_MS` and `LINGER_BYTES`: how long and how much of an answered request's unread body is discarded. */
  lingerMs: number
  lingerBytes: number
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

type Env = Record<string, string | undefined>

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be a whole number, got "${raw}"`)
  const value = Number(raw.trim())
  if (value < min || value > max)
    throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`)
  return value
}

function oneOf<T extends string>(env: Env, name: string, fallback: T, allowed: readonly T[]): T {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = raw.trim().toLowerCase() as T
  if (!allowed.includes(value))
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`)
  return value
}

/** Sizes accept a plain byte count or a number with KiB/MiB (also kb/mb, k/m). */
function bytes(env: Env, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const match = /^(\d+)\s*(b|k|kb|kib|m|mb|mib)?$/i.exec(raw.trim())
  if (!match) throw new ConfigError(`${name} must be a size such as 16384, 16KiB or 1MiB, got "${raw}"`)
  const unit = (match[2] ?? 'b').toLowerCase()
  const factor = unit.startsWith('m') ? 1024 * 1024 : unit.startsWith('k') ? 1024 : 1
  const value = Number(match[1]) * factor
  if (value < 1 || value > 64 * 1024 * 1024)
    throw new ConfigError(`${name} must be between 1 byte and 64MiB, got "${raw}"`)
  return value
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = raw.trim().toLowerCase()
  if (['1', 'true', 'yes', 'on'].includes(value)) return true
  if (['0', 'false', 'no', 'off'].includes(value)) return false
  throw new ConfigError(`${name} must be true or false, got "${raw}"`)
}

function databaseUrl(env: Env): string | undefined {
  // Surrounding spaces are dropped, as from every other setting (a leading one was refused, a
  // trailing one passed).
  const raw = env.DATABASE_URL?.trim()
  if (raw === undefined) return undefined
  // Unlike the other settings, empty is not "the default": it would quietly give each instance
  // of a PostgreSQL deployment a SQLite file of its own.
  if (raw.trim() === '') {
    throw new ConfigError(
      'DATABASE_URL is set but empty: unset it to use the SQLite file, or give a postgres:// URL',
    )
  }
  if (!/^postgres(ql)?:\/\//.test(raw))
    throw new ConfigError('DATABASE_URL must start with postgres:// or postgresql://')
  // libpq's host list (h1:p1,h2:p2) and target_session_attrs, which pg does not read itself.
  let url: URL
  try {
    url = new URL(parseHostList(raw, 'DATABASE_URL').urls[0] as string)
  } catch (error) {
    throw new ConfigError((error as Error).message)
  }
  // A misspelt mode would otherwise fail only later, as a TLS error from the driver.
  const sslmode = url.searchParams.get('sslmode')
  if (sslmode !== null && !SSL_MODES.includes(sslmode)) {
    throw new ConfigError(`DATABASE_URL sslmode must be one of ${SSL_MODES.join(', ')}; got "${sslmode}"`)
  }
  return raw
}

const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full']

function trustProxy(env: Env): boolean | string[] {
  const raw = env.TRUST_PROXY?.trim()
  if (!raw || raw.toLowerCase() === 'false') return false
  if (raw.toLowerCase() === 'true') return true
  const entries = raw.split(',').map((entry) => entry.trim())
  for (const entry of entries) {
    const [address = '', prefix, ...rest] = entry.split('/')
    const family = isIP(address)
    const prefixOk =
      prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 6 ? 128 : 32))
    if (!family || !prefixOk || rest.length > 0) {
      throw new ConfigError(
        `TRUST_PROXY must be true, false, or a comma-separated list of IP addresses or CIDR ranges, got "${entry}"`,
      )
    }
  }
  return entries
}

/**
 * Origins as a browser sends them (`https://app.example.com`, `http://localhost:3000`): a scheme,
 * a host and maybe a port, nothing else; `*` alone allows any origin.
 */
function corsOrigins(env: Env): string[] {
  const raw = env.CORS_ORIGINS?.trim()
  if (!raw) return []
  const entries = raw.split(',').map((entry) => entry.trim())
  if (entries.length === 1 && entries[0] === '*') return ['*']
  for (const entry of entries) {
    let origin: string | undefined
    try {
      origin = new URL(entry).origin
    } catch {
      origin = undefined
    }
    if (origin !== entry || !/^https?:/.test(entry)) {
      throw new ConfigError(
        `CORS_ORIGINS must be * or a comma-separated list of origins such as https://app.example.com (scheme, host and port only), got "${entry}"`,
      )
    }
  }
  return entries
}

/**
 * A file path. SQLite's `:memory:` became a file of that name in the working folder; an in-memory
 * store could not keep the durability promise anyway, nor be shared by workers.
 */
function sqlitePath(env: Env): string {
  const raw = env.PLANT_STORE_DB?.trim() || './data/plant-store.db'
  if (raw === ':memory:' || raw.startsWith('file:')) {
    throw new ConfigError(
      `PLANT_STORE_DB must be a file path (a store in memory, or a file: URI, is not supported), got "${raw}"`,
    )
  }
  return path.resolve(raw)
}

function otlpEndpoint(env: Env, name: string): string | undefined {
  const raw = env[name]?.trim()
  if (!raw) return undefined
  let url: URL | undefined
  try {
    url = new URL(raw)
  } catch {
    url = undefined
  }
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:')
    throw new ConfigError(`${name} must be an http:// or https:// URL, got "${raw}"`)
  return raw
}

/** Tracing is on when an OTLP endpoint is given, unless the SDK is switched off (the spec's rule). */
function tracing(env: Env): boolean {
  const endpoints = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT']
  const wanted = endpoints.map((name) => otlpEndpoint(env, name)).some(Boolean)
  return wanted && !bool(env, 'OTEL_SDK_DISABLED', false)
}

function metricsPort(env: Env, port: number): number | undefined {
  if (!env.METRICS_PORT?.trim()) return undefined
  const value = int(env, 'METRICS_PORT', 0, 0, 65535)
  if (value !== 0 && value === port)
    throw new ConfigError(
      `METRICS_PORT must differ from PORT (${port}): it serves metrics apart from the API`,
    )
  return value
}

/** Shedding begins at 90% of the heap V8 may grow to, before an out-of-memory crash would. */
const defaultHeapMb = () => Math.floor((getHeapStatistics().heap_size_limit * 0.9) / (1024 * 1024))

/**
 * Reads and checks the environment; throws a ConfigError naming the first bad variable.
 * `terminal` (whether stdout is one) only picks LOG_FORMAT's default.
 */
export function loadConfig(env: Env = process.env, terminal = process.stdout.isTTY === true): Config {
  const host = env.HOST?.trim() || '127.0.0.1'
  const config: Config = {
    port: int(env, 'PORT', 8080, 0, 65535),
    host,
    dbPath: sqlitePath(env),
    databaseUrl: databaseUrl(env),
    dbPoolSize: int(env, 'DB_POOL_SIZE', 10, 1, 1000),
    // Under 100 ms the service's own start-up queries could not finish (1 ms stopped it with a trace).
    dbStatementTimeoutMs: int(env, 'DB_STATEMENT_TIMEOUT_MS', 5000, 100, 3_600_000),
    logLevel: oneOf(env, 'LOG_LEVEL', 'info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    bodyLimit: bytes(env, 'BODY_LIMIT', 16 * 1024),
    headersTimeoutMs: int(env, 'HEADERS_TIMEOUT_MS', 9_000, 1, 3_600_000),
    requestTimeoutMs: int(env, 'REQUEST_TIMEOUT_MS', 30_000, 1, 3_600_000),
    keepAliveTimeoutMs: int(env, 'KEEP_ALIVE_TIMEOUT_MS', 5_000, 1, 3_600_000),
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 10_000, 0, 3_600_000),
    tokenCacheMs: int(env, 'TOKEN_CACHE_MS', 1_000, 0, 1_000),
    sqliteSync: oneOf(env, 'SQLITE_SYNC', 'full', ['full', 'normal']),
    sqliteMaxBatch: int(env, 'SQLITE_MAX_BATCH', 256, 1, 10_000),
    sqliteBusyTimeoutMs: int(env, 'SQLITE_BUSY_TIMEOUT_MS', 5000, 1, 600_000),
    webhookTimeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 1, 600_000),
    webhookMaxAttempts: int(env, 'WEBHOOK_MAX_ATTEMPTS', 19, 1, 1000),
    webhookBackoffBaseMs: int(env, 'WEBHOOK_BACKOFF_BASE_MS', 5_000, 1, 86_400_000),
    webhookBackoffMaxMs: int(env, 'WEBHOOK_BACKOFF_MAX_MS', 3 * 3_600_000, 1, 7 * 86_400_000),
    webhookPollMs: int(env, 'WEBHOOK_POLL_MS', 1_000, 10, 600_000),
    webhookLeaseMs: int(env, 'WEBHOOK_LEASE_MS', 60_000, 100, 86_400_000),
    webhookWorker: bool(env, 'WEBHOOK_WORKER', true),
    webhookAllowPrivate: bool(env, 'WEBHOOK_ALLOW_PRIVATE', false),
    corsOrigins: corsOrigins(env),
    trustProxy: trustProxy(env),
    metrics: bool(env, 'METRICS', true),
    metricsPort: undefined,
    metricsRateLimit: int(env, 'METRICS_RATE_LIMIT', 60, 0, 10_000_000),
    metricsRateWindowMs: int(env, 'METRICS_RATE_WINDOW_MS', 60_000, 1_000, 86_400_000),
    logFormat: oneOf(env, 'LOG_FORMAT', terminal ? 'pretty' : 'json', ['json', 'pretty']),
    tracing: tracing(env),
    // Set below, from the budget of the settings above.
    maxConnections: 0,
    maxConnectionsPerAddress: int(env, 'MAX_CONNECTIONS_PER_ADDRESS', 1024, 0, 10_000_000),
    authFailureLimit: int(env, 'AUTH_FAILURE_LIMIT', 100, 0, 10_000_000),
    authFailureWindowMs: int(env, 'AUTH_FAILURE_WINDOW_MS', 60_000, 1_000, 86_400_000),
    authFailureClients: int(env, 'AUTH_FAILURE_CLIENTS', 50_000, 1, 10_000_000),
    tokenRateLimit: int(env, 'TOKEN_RATE_LIMIT', 0, 0, 10_000_000),
    tokenRateWindowMs: int(env, 'TOKEN_RATE_WINDOW_MS', 60_000, 1_000, 86_400_000),
    loadShedEventLoopDelayMs: int(env, 'LOAD_SHED_EVENT_LOOP_DELAY_MS', 1_000, 0, 600_000),
    loadShedHeapMb: int(env, 'LOAD_SHED_HEAP_MB', defaultHeapMb(), 0, 1_000_000),
    lingerMs: int(env, 'LINGER_MS', 2_000, 1, 600_000),
    lingerBytes: bytes(env, 'LINGER_BYTES', 1024 * 1024),
  }
  config.metricsPort = config.metrics ? metricsPort(env, config.port) : undefined
  config.maxConnections = int(env, 'MAX_CONNECTIONS', descriptorBudget(config).maxConnections, 1, 10_000_000)
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
