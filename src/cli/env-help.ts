/** What `--help` says of each environment variable a command reads: its default and meaning. */
export const ENV_HELP: Record<string, [fallback: string, meaning: string]> = {
  PORT: ['8080', 'TCP port to listen on'],
  HOST: ['127.0.0.1', 'address to bind (0.0.0.0 to serve other machines)'],
  PLANT_STORE_DB: ['./data/plant-store.db', 'SQLite store file, resolved against the working folder'],
  DATABASE_URL: ['unset', 'postgres://... selects PostgreSQL instead of the SQLite file'],
  DB_POOL_SIZE: ['10', 'PostgreSQL connections per process'],
  DB_STATEMENT_TIMEOUT_MS: ['5000', 'PostgreSQL statement timeout'],
  SQLITE_SYNC: ['full', 'full: fsync every commit; normal: survive a process crash only'],
  SQLITE_MAX_BATCH: ['256', 'most creates one SQLite group commit takes'],
  SQLITE_BUSY_TIMEOUT_MS: ['5000', "how long a write waits for another process's lock"],
  LOG_LEVEL: ['info', 'fatal, error, warn, info, debug, trace or silent'],
  LOG_FORMAT: ['pretty on a terminal, else json', 'json lines or pino-pretty text'],
  METRICS: ['true', 'serve Prometheus metrics (false turns them off)'],
  METRICS_PORT: ['unset', 'serve metrics on this port only, summed over --workers'],
  OTEL_EXPORTER_OTLP_ENDPOINT: ['unset', 'OTLP/HTTP collector URL: turns tracing on'],
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: ['unset', 'the full traces URL instead; turns tracing on'],
  OTEL_SDK_DISABLED: ['false', 'true keeps tracing off even with an endpoint'],
  CORS_ORIGINS: ['unset', 'browser origins allowed to call /plants (comma-separated, or *)'],
  BODY_LIMIT: ['16KiB', 'largest request body (and largest import line)'],
  HEADERS_TIMEOUT_MS: ['9000', 'a client must send its headers within this'],
  REQUEST_TIMEOUT_MS: ['30000', 'whole-request limit'],
  KEEP_ALIVE_TIMEOUT_MS: ['5000', 'idle keep-alive connections are closed after this'],
  SHUTDOWN_TIMEOUT_MS: ['10000', 'how long SIGTERM waits for requests in flight'],
  TOKEN_CACHE_MS: ['1000', 'token lookup cache (the revocation bound), at most 1000'],
  TRUST_PROXY: ['unset', 'proxies whose X-Forwarded-* headers are believed'],
  WEBHOOK_WORKER: ['true', 'deliver webhooks from this process'],
  WEBHOOK_ALLOW_PRIVATE: ['false', 'allow webhook destinations on loopback and private addresses'],
  WEBHOOK_TIMEOUT_MS: ['10000', 'timeout of one webhook send'],
  WEBHOOK_MAX_ATTEMPTS: ['19', 'attempts before a delivery is failed'],
  WEBHOOK_BACKOFF_BASE_MS: ['5000', 'first retry delay, doubling with jitter'],
  WEBHOOK_BACKOFF_MAX_MS: ['10800000', 'retry delay cap (3 h)'],
  WEBHOOK_POLL_MS: ['1000', 'how often the worker looks for due deliveries'],
  WEBHOOK_LEASE_MS: ['60000', 'how long a claimed delivery is reserved for one instance'],
}

/** The variables that choose and tune the store: every command that opens one reads them. */
export const STORE_ENV = [
  'PLANT_STORE_DB',
  'DATABASE_URL',
  'DB_POOL_SIZE',
  'DB_STATEMENT_TIMEOUT_MS',
  'SQLITE_SYNC',
  'SQLITE_MAX_BATCH',
  'SQLITE_BUSY_TIMEOUT_MS',
]

/** Everything `serve` reads. */
export const SERVE_ENV = Object.keys(ENV_HELP)
