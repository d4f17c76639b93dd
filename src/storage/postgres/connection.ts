import net from 'node:net'
import postgres from 'postgres'
import { StoreUnavailableError } from '../storage.js'
import type { PgSql } from './migrations.js'
import type { CommitObserver } from '../storage.js'

/** How to reach PostgreSQL; mirrors DATABASE_URL, DB_POOL_SIZE and DB_STATEMENT_TIMEOUT_MS. */
export interface PostgresOptions {
  url: string
  /** Most connections the pool opens. */
  poolSize: number
  /** Server-side limit on any one statement, so a stuck query cannot hold a connection forever. */
  statementTimeoutMs: number
  /** Told of each create batch answered (metrics). */
  observer?: CommitObserver
}

/** Socket-level failures (Node) and postgres.js's own connection states. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
])

/** query_canceled: here, a statement that ran past statement_timeout. */
const STATEMENT_TIMEOUT_SQLSTATE = '57014'

/**
 * SQLSTATEs meaning "the server is going away, starting up or full", or "it takes no writes now"
 * (25006: a standby or a read-only primary, as during a failover), as opposed to a bad query.
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '25006'])

function errorCode(error: unknown): string | undefined {
  if (error instanceof AggregateError) {
    // Node's happy-eyeballs connect reports one error per address tried.
    for (const inner of error.errors) {
      const code = errorCode(inner)
      if (code) return code
    }
  }
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}

/**
 * True when the server ended the session the statement was sent on (57P01 terminated by an
 * administrator or a shutdown, 57P02 crash shutdown): the statement did not run, and the pool hands
 * out such a connection once more after a database restart, so the first request on each stale
 * connection failed with a 503 although the database was back.
 */
export function wasSessionTerminated(error: unknown): boolean {
  const code = errorCode(error)
  return code === '57P01' || code === '57P02'
}

/** True when the connection broke under the statement: whether it ran is unknown. */
export function wasConnectionLost(error: unknown): boolean {
  const code = errorCode(error)
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'CONNECTION_CLOSED'
}

/**
 * True when the error says the database cannot be reached (as opposed to a bad statement): network
 * errors, postgres.js connection states, SQLSTATE class 08 and server shutdown, start-up or "too
 * many connections". A cancelled statement (57014, statement_timeout) is not one of them.
 */
export function isUnavailableError(error: unknown): boolean {
  const code = errorCode(error)
  if (!code) return false
  return UNREACHABLE_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code)
}

/**
 * StoreUnavailableError (a 503 with Retry-After) for connectivity failures and for a statement
 * cancelled by DB_STATEMENT_TIMEOUT_MS (a lock or an overloaded server: worth a retry, not a bug);
 * any other error is returned unchanged.
 */
export function toStoreError(error: unknown): unknown {
  if (errorCode(error) === STATEMENT_TIMEOUT_SQLSTATE) {
    return new StoreUnavailableError('PostgreSQL did not answer within DB_STATEMENT_TIMEOUT_MS (57014)', {
      cause: error,
    })
  }
  if (!isUnavailableError(error)) return error
  const detail = error instanceof Error ? error.message : String(error)
  return new StoreUnavailableError(`PostgreSQL is unavailable (${errorCode(error)}): ${detail}`, {
    cause: error,
  })
}

/**
 * Opens the TCP or unix socket for a new pool connection. It exists to work around a postgres.js
 * 3.4.x bug (porsager/postgres#1193): when the peer closes the socket cleanly (FIN, no error
 * message) before the connection is ready, as a proxy or pooler with no healthy server does, the
 * waiting query is never settled and postgres.js reconnects in a zero-delay loop at full CPU.
 * Turning a clean close into an 'error' event lets postgres.js reject that query (and any sent
 * ones) with CONNECTION_CLOSED, which is exactly what it does itself for established connections,
 * and then fall back to its normal close handling and backoff.
 */
function openSocket(options: { host: string[]; port: number[]; path: string | false }): net.Socket {
  // Several hosts in the URL: rotate through them, as postgres.js does when it opens sockets itself.
  const index = hostCursor++ % Math.max(options.host.length, 1)
  const host = options.host[index] ?? 'localhost'
  const port = options.port[index] ?? options.port[0] ?? 5432
  const socket = options.path ? net.connect(options.path) : net.connect(port, host)
  // postgres.js names the server in its error messages from these.
  Object.assign(socket, { host, port })
  // Registered before postgres.js adds its own listeners, so it runs first. (With TLS postgres.js
  // removes it while wrapping the socket: the upstream behaviour then applies.)
  socket.on('close', (hadError) => {
    if (hadError || socket.listenerCount('error') === 0) return
    const error = new Error(`write CONNECTION_CLOSED ${options.path || `${host}:${port}`}`)
    socket.emit('error', Object.assign(error, { code: 'CONNECTION_CLOSED', errno: 'CONNECTION_CLOSED' }))
  })
  return socket
}
let hostCursor = 0

/** 50 ms, 100 ms, 200 ms ... up to 1 s, with jitter, for the n-th failed connection in a row. */
export function reconnectDelaySeconds(retries: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** retries, 1)
}

/**
 * A postgres.js pool configured for this store. int8 is parsed as `bigint` (postgres.js's default
 * is a string, and a JS number would round ids beyond 2^53); bigint parameters are sent as their
 * decimal text with type int8, so they bind exactly.
 */
export function createPostgresClient(options: PostgresOptions): PgSql {
  // `socket` is documented in the postgres.js README but missing from its type definitions.
  const settings: postgres.Options<{ bigint: postgres.PostgresType<bigint> }> & {
    socket: typeof openSocket
  } = {
    max: options.poolSize,
    // Seconds. A request must fail fast (503) rather than hang when the server is unreachable.
    connect_timeout: 5,
    // Seconds before a failed connection is retried. postgres.js's default grows to 10-20 s after
    // a handful of failures, and a query waits for that retry: during an outage requests took up to
    // 20 s to get their 503, and after it the service stayed unready for as long. Capped at 1 s.
    backoff: reconnectDelaySeconds,
    // Idle connections are closed, so a pool that saw an outage holds no half-dead sockets.
    idle_timeout: 60,
    onnotice: () => {},
    types: { bigint: postgres.BigInt },
    connection: { application_name: 'plant-store', statement_timeout: options.statementTimeoutMs },
    socket: openSocket,
  }
  return postgres(options.url, settings)
}
