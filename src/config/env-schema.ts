/**
 * Every environment variable the service reads, declared once: the JSON Schema of its value
 * (type, bounds, default), how its text is read, its `Config` field, its docs table, a one-line
 * `title` for `--help` and the `description` docs/configuration.md shows. `loadConfig` reads and
 * checks it, `--help` lists it, `scripts/config-docs.mjs` writes the docs tables from it.
 *
 * Annotations beside the JSON Schema keywords (Ajv is told they are annotations):
 * - `x-key`: the `Config` field it fills; none for a variable only a derived field reads.
 * - `x-group`: the docs table it is listed in.
 * - `x-read`: how its text becomes a value when the type alone does not say (text-readers.ts).
 * - `x-default`: the default as docs say it, where it is computed at start (no `default`) or
 *   needs words; Markdown.
 * - `x-empty`: where set-but-empty is an error rather than the default, what to do instead.
 */
export const ENV_SCHEMA = {
  type: 'object',
  properties: {
    PORT: {
      type: 'integer',
      minimum: 0,
      maximum: 65535,
      default: 8080,
      'x-key': 'port',
      'x-group': 'general',
      title: 'TCP port to listen on',
      description: 'TCP port (0 to 65535)',
    },
    HOST: {
      type: 'string',
      default: '127.0.0.1',
      'x-key': 'host',
      'x-group': 'general',
      title: 'address to bind (0.0.0.0 to serve other machines)',
      description: 'bind address (`0.0.0.0` to serve other machines)',
    },
    PLANT_STORE_DB: {
      type: 'string',
      default: './data/plant-store.db',
      'x-key': 'dbPath',
      'x-group': 'general',
      'x-read': 'file-path',
      title: 'SQLite store file, resolved against the working folder',
      description:
        "SQLite file, relative to the folder the process starts in; its folder is created. A path: `:memory:` and `file:` URIs are refused. A new store is private to the service's user (folders it creates 0700, files 0600): it holds token hashes and the webhook signing secrets. An existing file keeps its mode",
    },
    DATABASE_URL: {
      type: 'string',
      'x-key': 'databaseUrl',
      'x-group': 'general',
      'x-read': 'postgres-url',
      'x-empty': 'unset it to use the SQLite file, or give a postgres:// URL',
      title: 'postgres://... selects PostgreSQL instead of the SQLite file',
      description:
        "a `postgres://` or `postgresql://` URL selects PostgreSQL instead of SQLite; libpq's host list (`h1:5432,h2:5432`, each port 1 to 65535) and `target_session_attrs` (`any`, `read-write`, `read-only`, `primary`, `standby`, `prefer-standby`) are read ([postgresql.md](postgresql.md#several-hosts-and-failover)); set but empty, it is refused",
    },
    DATABASE_READ_URL: {
      type: 'string',
      'x-key': 'databaseReadUrl',
      'x-group': 'general',
      'x-read': 'postgres-url',
      'x-empty': 'unset it to read from the primary, or give a postgres:// URL',
      title: 'postgres://... of a replica for the plant reads of GET routes',
      description:
        'a `postgres://` URL of a replica (or a host list with `target_session_attrs=prefer-standby`) for the plant reads of `GET /plants` and `GET /plants/{id}`; each read runs there once the replica has replayed every write acknowledged before it, else on the primary ([postgresql.md](postgresql.md#reads-from-a-replica)). PostgreSQL only (needs `DATABASE_URL`); `DB_POOL_SIZE` is split between the two pools',
    },
    DB_POOL_SIZE: {
      type: 'integer',
      minimum: 1,
      maximum: 1000,
      default: 10,
      'x-key': 'dbPoolSize',
      'x-group': 'general',
      title: 'PostgreSQL connections per process',
      description:
        'PostgreSQL connections per process (1 to 1000); with `DATABASE_READ_URL`, the primary pool gets half of them rounded up and the read pool the rest (at least 2 then)',
    },
    DB_STATEMENT_TIMEOUT_MS: {
      type: 'integer',
      // Under 100 ms the service's own start-up queries could not finish.
      minimum: 100,
      maximum: 3_600_000,
      default: 5000,
      'x-key': 'dbStatementTimeoutMs',
      'x-group': 'general',
      title: 'PostgreSQL statement timeout',
      description:
        "PostgreSQL statement timeout (100 to 3,600,000); a statement cancelled by it is a 503 with `Retry-After`. Each request's store calls together end by this plus 1 s from its arrival (a frozen or partitioned server never sends the cancel), retries during a failover included; a write that times out may still commit, so retry it (creates are idempotent)",
    },
    SQLITE_SYNC: {
      type: 'string',
      enum: ['full', 'normal'],
      default: 'full',
      'x-key': 'sqliteSync',
      'x-group': 'general',
      title: 'full: fsync every commit; normal: survive a process crash only',
      description:
        "`full`: a 200 is sent after the commit's WAL is synced, so it survives power loss. `normal`: it survives a crash of the process; the last commits may be lost on power loss ([durability.md](durability.md))",
    },
    SQLITE_MAX_BATCH: {
      type: 'integer',
      minimum: 1,
      maximum: 10_000,
      default: 256,
      'x-key': 'sqliteMaxBatch',
      'x-group': 'general',
      title: 'most creates one SQLite group commit takes',
      description:
        'most creates one group commit takes (1 to 10,000): larger batches share one sync among more requests, smaller ones bound how long a batch waits',
    },
    SQLITE_BUSY_TIMEOUT_MS: {
      type: 'integer',
      minimum: 1,
      maximum: 600_000,
      default: 5000,
      'x-key': 'sqliteBusyTimeoutMs',
      'x-group': 'general',
      title: "how long a write waits for another process's lock",
      description:
        "how long a write waits for another process's lock on the file before its batch answers 503 (1 to 600,000)",
    },
    LOG_LEVEL: {
      type: 'string',
      enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
      default: 'info',
      'x-key': 'logLevel',
      'x-group': 'general',
      title: 'fatal, error, warn, info, debug, trace or silent',
      description: '`fatal` `error` `warn` `info` `debug` `trace` `silent`',
    },
    LOG_FORMAT: {
      type: 'string',
      enum: ['json', 'pretty'],
      'x-key': 'logFormat',
      'x-group': 'general',
      'x-default': '`pretty` on a terminal, else `json`',
      title: 'json lines or pino-pretty text',
      description: "`json`: one JSON object per line; `pretty`: pino-pretty's text",
    },
    METRICS: {
      type: 'boolean',
      default: true,
      'x-key': 'metrics',
      'x-group': 'general',
      title: 'serve Prometheus metrics (false turns them off)',
      description: 'Serve Prometheus metrics; `false` turns them off (and stops counting requests)',
    },
    METRICS_PORT: {
      type: 'integer',
      minimum: 0,
      maximum: 65535,
      'x-key': 'metricsPort',
      'x-group': 'general',
      title: 'serve metrics on this port only, summed over --workers',
      description:
        'Serve metrics on `HOST:METRICS_PORT` only, not at `GET /metrics` on `PORT`; with `--workers`, summed over the workers. Must differ from `PORT`',
    },
    METRICS_RATE_LIMIT: {
      type: 'integer',
      minimum: 0,
      maximum: 10_000_000,
      default: 60,
      'x-key': 'metricsRateLimit',
      'x-group': 'general',
      title: 'scrapes of GET /metrics per token per window; 0 for none',
      description:
        'Scrapes of `GET /metrics` one token may make per window before 429; `0` for no limit. Not applied on `METRICS_PORT`',
    },
    METRICS_RATE_WINDOW_MS: {
      type: 'integer',
      minimum: 1000,
      maximum: 86_400_000,
      default: 60_000,
      'x-key': 'metricsRateWindowMs',
      'x-group': 'general',
      title: 'the window of METRICS_RATE_LIMIT',
      description: 'The window of `METRICS_RATE_LIMIT`, 1000 to 86400000',
    },
    OTEL_EXPORTER_OTLP_ENDPOINT: {
      type: 'string',
      'x-group': 'general',
      'x-read': 'http-url',
      title: 'OTLP/HTTP collector URL: turns tracing on',
      description:
        'An `http://` or `https://` URL of an OTLP/HTTP collector: turns tracing on (spans go to `<url>/v1/traces`)',
    },
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {
      type: 'string',
      'x-group': 'general',
      'x-read': 'http-url',
      title: 'the full traces URL instead; turns tracing on',
      description: 'The full traces URL instead; also turns tracing on',
    },
    OTEL_SDK_DISABLED: {
      type: 'boolean',
      default: false,
      'x-group': 'general',
      title: 'true keeps tracing off even with an endpoint',
      description: '`true` keeps tracing off even with an endpoint',
    },
    BODY_LIMIT: {
      type: 'integer',
      minimum: 1,
      maximum: 64 * 1024 * 1024,
      default: 16 * 1024,
      'x-key': 'bodyLimit',
      'x-group': 'general',
      'x-read': 'size',
      title: 'largest request body (and largest import line)',
      description:
        'largest request body, 1 byte to `64MiB`; bytes or `KiB`/`MiB`, any case (`k`/`KB` and `m`/`MB` are read as the same binary units, as nginx reads `16k`)',
    },
    HEADERS_TIMEOUT_MS: {
      type: 'integer',
      minimum: 1,
      maximum: 3_600_000,
      default: 9000,
      'x-key': 'headersTimeoutMs',
      'x-group': 'general',
      title: 'a client must send its headers within this',
      description:
        'a client must send all its headers within this (checked every 500 ms, so a trickling client is cut off within 9.5 s by default)',
    },
    REQUEST_TIMEOUT_MS: {
      type: 'integer',
      minimum: 1,
      maximum: 3_600_000,
      default: 30_000,
      'x-key': 'requestTimeoutMs',
      'x-group': 'general',
      title: 'whole-request limit',
      description:
        'whole-request limit, body included; must be at least `HEADERS_TIMEOUT_MS` (Node ignores a shorter one, so that is refused at start)',
    },
    KEEP_ALIVE_TIMEOUT_MS: {
      type: 'integer',
      minimum: 1,
      maximum: 3_600_000,
      default: 5000,
      'x-key': 'keepAliveTimeoutMs',
      'x-group': 'general',
      title: 'idle keep-alive connections are closed after this',
      description:
        "announced in `Keep-Alive: timeout=`; an idle connection is closed about 1 s after that (Node's margin), so a client that honours the header never races the close",
    },
    SHUTDOWN_TIMEOUT_MS: {
      type: 'integer',
      minimum: 0,
      maximum: 3_600_000,
      default: 10_000,
      'x-key': 'shutdownTimeoutMs',
      'x-group': 'general',
      title: 'how long SIGTERM waits for requests in flight',
      description:
        'how long SIGTERM/SIGINT waits for requests in flight; idle connections are closed at once, or after up to 2 s while a connection that has sent nothing may still be sending ([operations.md](operations.md#shutdown))',
    },
    TOKEN_CACHE_MS: {
      type: 'integer',
      minimum: 0,
      maximum: 1000,
      default: 1000,
      'x-key': 'tokenCacheMs',
      'x-group': 'general',
      title: 'token lookup cache (the revocation bound), at most 1000',
      description: 'how long a token lookup is served from memory, at most 1000 (the revocation bound)',
    },
    TRUST_PROXY: {
      type: ['boolean', 'array'],
      items: { type: 'string' },
      default: false,
      'x-key': 'trustProxy',
      'x-group': 'general',
      'x-read': 'proxy-list',
      'x-default': 'unset (none)',
      title: 'proxies whose X-Forwarded-* headers are believed',
      description:
        "proxies whose `X-Forwarded-Proto`/`-Host`/`-For` are believed: IP addresses or CIDR ranges, comma-separated, or `true` for any (which lets any client that reaches the port choose its own address; the service warns at start: [security.md](security.md#behind-a-proxy)). Used for the client address of the logs, the failed-authentication limit and the per-address connection cap, the list's `Link` URL, and which clients' trace context is believed",
    },
    WEBHOOK_WORKER: {
      type: 'boolean',
      default: true,
      'x-key': 'webhookWorker',
      'x-group': 'general',
      title: 'deliver webhooks from this process',
      description: 'deliver webhooks from this process ([webhooks.md](webhooks.md))',
    },
    WEBHOOK_TIMEOUT_MS: {
      type: 'integer',
      minimum: 1,
      maximum: 600_000,
      default: 10_000,
      'x-key': 'webhookTimeoutMs',
      'x-group': 'general',
      title: 'timeout of one webhook send',
      description: 'per-attempt timeout of a webhook send',
    },
    WEBHOOK_MAX_ATTEMPTS: {
      type: 'integer',
      minimum: 1,
      maximum: 1000,
      default: 19,
      'x-key': 'webhookMaxAttempts',
      'x-group': 'general',
      title: 'attempts before a delivery is failed',
      description: 'attempts before a delivery is marked failed (about 24 h with the defaults)',
    },
    WEBHOOK_BACKOFF_BASE_MS: {
      type: 'integer',
      minimum: 1,
      maximum: 86_400_000,
      default: 5000,
      'x-key': 'webhookBackoffBaseMs',
      'x-group': 'general',
      title: 'first retry delay, doubling with jitter',
      description: 'first retry delay; doubles each attempt, with jitter',
    },
    WEBHOOK_BACKOFF_MAX_MS: {
      type: 'integer',
      minimum: 1,
      maximum: 7 * 86_400_000,
      default: 3 * 3_600_000,
      'x-key': 'webhookBackoffMaxMs',
      'x-group': 'general',
      title: 'retry delay cap (3 h)',
      description: 'retry delay cap (3 h); must be at least `WEBHOOK_BACKOFF_BASE_MS`',
    },
    WEBHOOK_POLL_MS: {
      type: 'integer',
      minimum: 10,
      maximum: 600_000,
      default: 1000,
      'x-key': 'webhookPollMs',
      'x-group': 'general',
      title: 'how often the worker looks for due deliveries',
      description: 'how often the worker looks for due deliveries',
    },
    WEBHOOK_LEASE_MS: {
      type: 'integer',
      minimum: 100,
      maximum: 86_400_000,
      default: 60_000,
      'x-key': 'webhookLeaseMs',
      'x-group': 'general',
      title: 'how long a claimed delivery is reserved for one instance',
      description:
        'how long a claimed delivery is reserved for one process; must be larger than `WEBHOOK_TIMEOUT_MS`',
    },
    WEBHOOK_ALLOW_PRIVATE: {
      type: 'boolean',
      default: false,
      'x-key': 'webhookAllowPrivate',
      'x-group': 'general',
      title: 'allow webhook destinations on loopback and private addresses',
      description:
        '`true`: deliver webhooks to loopback, private, link-local and other non-public addresses, and let `webhooks add` take such URLs (local receivers, tests). `false`: such destinations are refused when added literally and at every connection ([security.md](security.md#webhook-destinations))',
    },
    CORS_ORIGINS: {
      type: 'array',
      items: { type: 'string' },
      default: [],
      'x-key': 'corsOrigins',
      'x-group': 'general',
      'x-read': 'origin-list',
      'x-default': 'unset (no CORS)',
      title: 'browser origins allowed to call /plants (comma-separated, or *)',
      description:
        'browser origins allowed to call `/plants`, comma-separated (scheme, host and port only), or `*` for any. Unset or empty: no CORS headers, `OPTIONS` answered `405` ([security.md](security.md#cors))',
    },
    MAX_CONNECTIONS: {
      type: 'integer',
      minimum: 1,
      maximum: 10_000_000,
      'x-key': 'maxConnections',
      'x-group': 'limits',
      'x-default':
        'what the [descriptor budget](limits.md#the-descriptor-budget) leaves of the open-file limit (780 under `ulimit -n 1024` with SQLite and the webhook worker)',
      title: 'open connections in all',
      description:
        'Open connections in all; the next ones are answered 503 `TOO_MANY_CONNECTIONS` with `Retry-After: 1` and closed. 1 to 10,000,000.',
    },
    MAX_CONNECTIONS_PER_ADDRESS: {
      type: 'integer',
      minimum: 0,
      maximum: 10_000_000,
      default: 1024,
      'x-key': 'maxConnectionsPerAddress',
      'x-group': 'limits',
      title: 'open connections from one client address (0: no cap)',
      description:
        'Open connections from one client address, IPv6 by /64 (not from `TRUST_PROXY` proxies); the next ones are answered as past `MAX_CONNECTIONS`; 0: no cap.',
    },
    AUTH_FAILURE_LIMIT: {
      type: 'integer',
      minimum: 0,
      maximum: 10_000_000,
      default: 100,
      'x-key': 'authFailureLimit',
      'x-group': 'limits',
      title: 'failed authentications per address per window before 429',
      description:
        'Failed authentications one address may have per window before its failures get 429; 0: no limit.',
    },
    AUTH_FAILURE_WINDOW_MS: {
      type: 'integer',
      minimum: 1000,
      maximum: 86_400_000,
      default: 60_000,
      'x-key': 'authFailureWindowMs',
      'x-group': 'limits',
      title: 'the window of AUTH_FAILURE_LIMIT',
      description: 'The window of `AUTH_FAILURE_LIMIT`, 1000 to 86400000.',
    },
    AUTH_FAILURE_CLIENTS: {
      type: 'integer',
      minimum: 1,
      maximum: 10_000_000,
      default: 50_000,
      'x-key': 'authFailureClients',
      'x-group': 'limits',
      title: 'client addresses AUTH_FAILURE_LIMIT counts at once',
      description:
        "Client addresses (IPv6: /64s) the failed-authentication limit counts at once, about 210 bytes each (10 MB at the default); set it above the number of addresses that may fail within one window. Past it, a new address's failures get 429 until the oldest window ends; none is forgotten before its window ends. 1 to 10,000,000.",
    },
    TOKEN_RATE_LIMIT: {
      type: 'integer',
      minimum: 0,
      maximum: 10_000_000,
      default: 0,
      'x-key': 'tokenRateLimit',
      'x-group': 'limits',
      'x-default': '`0` (off)',
      title: 'requests one token may make per window before 429',
      description: 'Requests one token may make per window before 429.',
    },
    TOKEN_RATE_WINDOW_MS: {
      type: 'integer',
      minimum: 1000,
      maximum: 86_400_000,
      default: 60_000,
      'x-key': 'tokenRateWindowMs',
      'x-group': 'limits',
      title: 'the window of TOKEN_RATE_LIMIT',
      description: 'The window of `TOKEN_RATE_LIMIT`, 1000 to 86400000.',
    },
    LOAD_SHED_EVENT_LOOP_DELAY_MS: {
      type: 'integer',
      minimum: 0,
      maximum: 600_000,
      default: 1000,
      'x-key': 'loadShedEventLoopDelayMs',
      'x-group': 'limits',
      title: 'event-loop delay past which requests get 503 (0: off)',
      description: 'Mean event-loop delay (sampled each second) past which requests get 503; 0: not checked.',
    },
    LOAD_SHED_HEAP_MB: {
      type: 'integer',
      minimum: 0,
      maximum: 1_000_000,
      'x-key': 'loadShedHeapMb',
      'x-group': 'limits',
      'x-default': "90% of V8's heap limit",
      title: 'heap in use past which requests get 503 (0: off)',
      description: 'Heap in use (MiB) past which requests get 503; 0: not checked.',
    },
    LINGER_MS: {
      type: 'integer',
      minimum: 1,
      maximum: 600_000,
      default: 2000,
      'x-key': 'lingerMs',
      'x-group': 'limits',
      title: "how long an answered request's unread body is discarded",
      description:
        "How long an answered request's unread body is read and discarded before the connection closes.",
    },
    LINGER_BYTES: {
      type: 'integer',
      minimum: 1,
      maximum: 64 * 1024 * 1024,
      default: 1024 * 1024,
      'x-key': 'lingerBytes',
      'x-group': 'limits',
      'x-read': 'size',
      title: 'how much of it at most',
      description: 'How much of it at most (a size such as `1048576`, `512KiB`, `1MiB`; at most 64 MiB).',
    },
  },
} as const

/** The variables, by name. */
export type EnvVariables = (typeof ENV_SCHEMA)['properties']
export type EnvName = keyof EnvVariables
/** One variable's declaration, as code that walks the schema sees it. */
export interface EnvVariable {
  type: string | readonly string[]
  default?: unknown
  minimum?: number
  maximum?: number
  enum?: readonly string[]
  title: string
  description: string
  'x-key'?: string
  'x-group': 'general' | 'limits'
  'x-read'?: string
  'x-default'?: string
  'x-empty'?: string
}

/** The schema's annotation keywords, which Ajv's strict mode must be told of. */
export const ENV_ANNOTATIONS = ['x-key', 'x-group', 'x-read', 'x-default', 'x-empty']

/** Each variable's declaration, in the schema's order. */
export const ENV_VARIABLES = Object.entries(ENV_SCHEMA.properties) as [EnvName, EnvVariable][]
