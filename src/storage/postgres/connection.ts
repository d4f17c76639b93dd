import pg from 'pg'
import { StoreUnavailableError } from '../storage.js'
import { clientOf, HostChooser, HostRefusedError, targetOf } from './host-choice.js'
import { parseHostList } from '../../config/postgres-host-list.js'
import type { CommitObserver, ReadObserver } from '../storage.js'

/** How to reach PostgreSQL; mirrors DATABASE_URL, DATABASE_READ_URL, DB_POOL_SIZE and DB_STATEMENT_TIMEOUT_MS. */
export interface PostgresOptions {
  url: string
  /** A replica for plant reads (replica-reads.ts); undefined reads from `url`. */
  readUrl?: string
  /** Most connections the pools open together (see splitPoolSize). */
  poolSize: number
  /** Server-side limit on any one statement, so a stuck query cannot hold a connection forever. */
  statementTimeoutMs: number
  /** Told of each migration as it begins: on a big store one may take a while. */
  onMigration?: (version: number, name: string) => void
  /** Told of each create batch answered (metrics). */
  observer?: CommitObserver
  /** Told where plant reads ran, with a read pool (metrics). */
  readObserver?: ReadObserver
}

/**
 * DB_POOL_SIZE split between the primary pool and the read pool, the primary's half rounded up:
 * it keeps the creates, tokens, webhooks, each read batch's WAL position and the fallbacks.
 */
export function splitPoolSize(total: number, readPool: boolean): { primary: number; read: number } {
  if (!readPool) return { primary: total, read: 0 }
  const read = Math.floor(total / 2)
  return { primary: total - read, read }
}

/**
 * How long past DB_STATEMENT_TIMEOUT_MS the service waits for an answer before giving up on it
 * itself: statement_timeout is enforced by the server, so a frozen or cut-off server never sends it.
 */
export const CLIENT_DEADLINE_MARGIN_MS = 1000

/** A new connection (TCP, TLS, startup) that takes longer than this fails the request with a 503. */
export const CONNECT_TIMEOUT_MS = 5000

/** Idle time after which TCP keepalive probes a pooled connection, so a vanished server is noticed. */
export const KEEPALIVE_DELAY_MS = 10_000

/** Socket-level failures that Node reports with a code. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
])

/**
 * pg reports its own connection failures (lost socket, connect and query timeouts, a client already
 * broken) as plain Errors with no code, only a message (brianc/node-postgres#3380), so they are
 * recognised by it.
 */
const PG_CONNECTION_MESSAGE =
  /^(Connection terminated|timeout expired|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Client was closed)/

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

function isPgConnectionError(error: unknown): boolean {
  return (
    error instanceof Error &&
    !(error instanceof pg.DatabaseError) &&
    PG_CONNECTION_MESSAGE.test(error.message)
  )
}

/**
 * True when the server ended the session the statement was sent on (57P01 terminated by an
 * administrator or a shutdown, 57P02 crash shutdown): the statement did not run.
 */
export function wasSessionTerminated(error: unknown): boolean {
  const code = errorCode(error)
  return code === '57P01' || code === '57P02'
}

/** Failures before a statement is sent: no connection, or one the server would not serve. */
const NEVER_RUN_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'])
/** 57P03 starting up or shutting down, 53300 too many connections, 25006 read-only (refused before it ran). */
const NEVER_RUN_SQLSTATES = new Set(['57P03', '53300', '25006'])
/** pg-pool's own: no pooled connection came free, or a new one did not finish connecting. */
const POOL_CONNECT_MESSAGE =
  /^(timeout exceeded when trying to connect|Connection terminated due to connection timeout)/

/**
 * True when the statement certainly did not run (so any call may be sent again), as during a
 * failover: the server refused the connection or the statement, or the host was of the wrong role.
 */
export function wasNeverRun(error: unknown): boolean {
  if (error instanceof HostRefusedError) return true
  if (
    error instanceof Error &&
    !(error instanceof pg.DatabaseError) &&
    POOL_CONNECT_MESSAGE.test(error.message)
  )
    return true
  const code = errorCode(error)
  return code !== undefined && (NEVER_RUN_CODES.has(code) || NEVER_RUN_SQLSTATES.has(code))
}

/** True when the connection broke under the statement: whether it ran is unknown. */
export function wasConnectionLost(error: unknown): boolean {
  const code = errorCode(error)
  if (code === 'ECONNRESET' || code === 'EPIPE') return true
  return error instanceof Error && error.message.startsWith('Connection terminated unexpectedly')
}

/**
 * True when the error says the database cannot be reached (as opposed to a bad statement): network
 * errors, pg's own connection failures, SQLSTATE class 08 and server shutdown, start-up, "too many
 * connections" or read-only. A cancelled statement (57014, statement_timeout) is not one of them.
 */
export function isUnavailableError(error: unknown): boolean {
  if (isPgConnectionError(error) || error instanceof HostRefusedError) return true
  const code = errorCode(error)
  if (!code) return false
  return SOCKET_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code)
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
  return new StoreUnavailableError(`PostgreSQL is unavailable (${errorCode(error) ?? 'pg'}): ${detail}`, {
    cause: error,
  })
}

const INT8_OID = 20

/**
 * int8 as `bigint` (pg's default is a string, and a JS number would round ids beyond 2^53); the
 * rest as pg parses them (timestamptz as Date). pg sends a bigint parameter as its decimal text.
 */
export const int8AsBigInt = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID && format !== 'binary') return (text: string) => BigInt(text)
    return pg.types.getTypeParser(oid, format ?? 'text')
  },
} as pg.CustomTypesConfig

/**
 * What picks the host of each new connection for `url` (host-choice.ts): undefined for one host
 * with no role to check, where pg's own client does. Pools that share one follow the same host.
 */
export function hostChooserFor(url: string, variable = 'DATABASE_URL'): HostChooser | undefined {
  const list = parseHostList(url, variable)
  return list.urls.length > 1 || list.targetSessionAttrs !== 'any'
    ? new HostChooser(list, variable)
    : undefined
}

/**
 * A pg pool configured for this store. `clientDeadline: false` leaves out the client-side query
 * timeout, for migrations, whose DDL may run far longer than a request.
 */
export function createPool(
  options: PostgresOptions,
  clientDeadline = true,
  chooser = hostChooserFor(options.url),
): pg.Pool {
  const pool = new pg.Pool({
    connectionString: chooser?.list.urls[0] ?? options.url,
    ...(chooser && {
      Client: clientOf(chooser) as unknown as new () => pg.ClientBase,
      onConnect: (client: pg.ClientBase) => chooser.check(client, targetOf(client)),
    }),
    max: options.poolSize,
    // Waiting for a free connection and opening a new one both fail with a 503 after this.
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    // Idle connections are closed, so a pool that saw an outage holds no half-dead sockets.
    idleTimeoutMillis: 60_000,
    // A client-side bound too: the pool then discards the connection, whose server stopped answering.
    query_timeout: clientDeadline ? options.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS : undefined,
    statement_timeout: options.statementTimeoutMs,
    application_name: 'plant-store',
    // JIT pays off for long analytic queries only: a batch of pages from random cursors is planned
    // over jit_above_cost on 10M plants, and compiling it cost 8-13 ms a statement.
    options: '-c jit=off',
    types: int8AsBigInt,
    // A server that vanished without a FIN or RST (a host or network failure) fails the connection.
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
  })
  // An idle connection that fails (a restart, pg_terminate_backend) is dropped by the pool, which
  // then emits 'error'; unhandled, that event would end the process. The next query reconnects.
  pool.on('error', () => {})
  return pool
}
