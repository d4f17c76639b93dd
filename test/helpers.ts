import { type ChildProcess, execFile, type SpawnOptions, spawn } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import net from 'node:net'
import { after, describe } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import {
  generateTokenId,
  generateTokenSecret,
  hashToken,
  SCOPES,
  DEFAULT_SCOPES,
  type Scope,
} from '../src/auth/token-format.js'
import type { RunningServer } from '../src/server.js'
import type { Storage } from '../src/storage/storage.js'

// Loaded on first use: the server's modules and the PostgreSQL driver cost a file that only spawns
// services, or never touches PostgreSQL, some 0.5 CPU seconds to load.
const pgAdmin = async (url: string) => (await import('./pg-admin.js')).pgAdmin(url)

export const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
/** The bundled build that `npm start` and `npm run cli` run (scripts/bundle.mjs). */
export const cliPath = path.join(projectRoot, 'dist/bundle/main.js')

export type StoreKind = 'sqlite' | 'postgres'

/** SQLite always; PostgreSQL too when TEST_DATABASE_URL points at a disposable server. */
export function testStores(): StoreKind[] {
  if (process.env.TEST_DATABASE_URL) return ['sqlite', 'postgres']
  if (mustRunEverything()) {
    throw new Error(
      'TEST_DATABASE_URL must be set so every suite also runs on PostgreSQL (PLANT_STORE_REQUIRE_ALL_TESTS)',
    )
  }
  return ['sqlite']
}

export function tempDir(prefix = 'plant-store-test-'): string {
  return mkdtempSync(path.join(os.tmpdir(), prefix))
}

let fileDatabase: Promise<string> | undefined

/**
 * This test file's own PostgreSQL database: created from TEST_DATABASE_URL on first use (named after
 * it, so it contains `test`, plus this process's id) and dropped when the file's tests end. Files run
 * in parallel, each in its own process, so no two share a database.
 */
export function fileDatabaseUrl(): Promise<string> {
  const base = process.env.TEST_DATABASE_URL
  if (!base) throw new Error('TEST_DATABASE_URL is not set')
  fileDatabase ??= (async () => {
    const url = new URL(base)
    const name = `${decodeURIComponent(url.pathname.slice(1))}_f${process.pid}`
    if (!/test/i.test(name))
      throw new Error(`refusing to use database "${name}": its name must contain "test"`)
    const sql = await pgAdmin(base)
    try {
      // Two statements: CREATE DATABASE cannot run in the transaction a multi-statement query is.
      await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
      await sql.unsafe(`CREATE DATABASE "${name}"`)
    } finally {
      await sql.end()
    }
    url.pathname = `/${encodeURIComponent(name)}`
    return url.toString()
  })()
  return fileDatabase
}

// Registered while the file loads (the root test's hook): the file's database goes with it.
if (process.env.TEST_DATABASE_URL) {
  after(async () => {
    if (!fileDatabase) return
    const name = decodeURIComponent(new URL(await fileDatabase).pathname.slice(1))
    const sql = await pgAdmin(process.env.TEST_DATABASE_URL as string)
    try {
      await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
    } finally {
      await sql.end()
    }
  })
}

/** Empties this file's database (never TEST_DATABASE_URL's own) so the next service starts from nothing. */
export async function resetPostgres(): Promise<void> {
  const sql = await pgAdmin(await fileDatabaseUrl())
  try {
    await sql.unsafe('DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public')
  } finally {
    await sql.end()
  }
}

/** The environment a service under test runs with: a fresh store, a free port, quiet logs. */
export async function serviceEnv(
  store: StoreKind,
  extra: Record<string, string> = {},
): Promise<Record<string, string>> {
  // Files run side by side on a shared machine: event-loop lag sheds requests with 503 OVERLOADED,
  // which only load-shedding.test.ts tests (it sets its own threshold).
  const env: Record<string, string> = {
    PORT: '0',
    LOG_LEVEL: 'silent',
    LOAD_SHED_EVENT_LOOP_DELAY_MS: '0',
    ...extra,
  }
  if (store === 'postgres') {
    const url = await fileDatabaseUrl()
    if (!extra.KEEP_DATABASE) await resetPostgres()
    env.DATABASE_URL = url
  } else {
    env.PLANT_STORE_DB ??= path.join(tempDir(), 'plants.db')
  }
  return env
}

export interface TestService {
  url: string
  storage: Storage
  server: RunningServer
  env: Record<string, string>
  /** Issues a token straight into the store, as `tokens create` would. */
  token(scopes?: readonly Scope[], expiresAt?: Date | null): Promise<string>
  close(): Promise<void>
}

export async function issueToken(
  storage: Storage,
  scopes: readonly Scope[] = SCOPES,
  expiresAt: Date | null = null,
  name = 'test',
): Promise<string> {
  const secret = generateTokenSecret()
  await storage.createToken({
    id: generateTokenId(),
    name,
    scopes: [...scopes],
    hash: hashToken(secret),
    createdAt: new Date(),
    expiresAt,
    lastUsedAt: null,
    revokedAt: null,
  })
  return secret
}

/** Starts the production server (same factory, same config loader) in this process on a free port. */
export async function startService(
  store: StoreKind,
  extraEnv: Record<string, string> = {},
): Promise<TestService> {
  const env = await serviceEnv(store, extraEnv)
  const [{ loadConfig }, { openStorage }, { startServer }] = await Promise.all([
    import('../src/config.js'),
    import('../src/storage/open.js'),
    import('../src/server.js'),
  ])
  const config = loadConfig(env)
  const storage = await openStorage(config)
  const server = await startServer(config, storage)
  const address = server.app.server.address()
  if (!address || typeof address === 'string') throw new Error('server has no TCP address')
  return {
    url: `http://127.0.0.1:${address.port}`,
    storage,
    server,
    env,
    token: (scopes, expiresAt) => issueToken(storage, scopes, expiresAt),
    close: () => server.shutdown('test finished'),
  }
}

export interface SpawnedService {
  url: string
  child: ChildProcess
  output: () => string
  exited: Promise<number | null>
}

/**
 * Runs `plant-store serve [args]` as its own process, for crash, signal and multi-instance tests;
 * with `viaNpm`, the ways docs/operations.md starts it (`npm start`, or `npm run cli -- serve`), whose npm
 * process is then `child`.
 */
export async function spawnService(
  env: Record<string, string>,
  args: string[] = [],
  { viaNpm, fileLimit }: { viaNpm?: 'start' | 'cli'; fileLimit?: number } = {},
): Promise<SpawnedService> {
  // Info level: the listening line tells the port, and tests read the request log.
  const options: SpawnOptions = {
    cwd: projectRoot,
    env: { ...process.env, ...env, LOG_LEVEL: 'info', PORT: env.PORT ?? '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  }
  const npmArgs = { start: ['start'], cli: ['run', 'cli'] }
  const child = viaNpm
    ? spawn(
        'npm',
        [...npmArgs[viaNpm], '--silent', '--', ...(viaNpm === 'cli' ? ['serve'] : []), ...args],
        options,
      )
    : fileLimit
      ? // `ulimit -n` in a shell that then becomes the service: its open-file limit, soft and hard.
        spawn(
          'bash',
          ['-c', `ulimit -n ${fileLimit} && exec "$0" "$@"`, process.execPath, cliPath, 'serve', ...args],
          options,
        )
      : spawn(process.execPath, [cliPath, 'serve', ...args], options)
  let output = ''
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  const url = await new Promise<string>((resolve, reject) => {
    // Not a speed check: files start services side by side, on a machine that may be shared.
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`service did not start:\n${output}`))
    }, 60_000)
    let listening = false
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      // Searched until found only: each search flattens the output, which grows by every request's log line.
      if (listening) return
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)
      if (match?.[1]) {
        listening = true
        clearTimeout(timer)
        resolve(match[1])
      }
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    exited.then(() => reject(new Error(`service exited early:\n${output}`)))
  })
  return { url, child, output: () => output, exited }
}

export interface StartedProcess {
  /** The store's environment (a fresh SQLite file or this file's PostgreSQL database). */
  env: Record<string, string>
  /** A token stored as `tokens create` stores one (createToken). */
  token: string
  service: SpawnedService
}

export interface StartProcessOptions {
  /** Added to the store's environment (serviceEnv). */
  env?: Record<string, string>
  /** The token's name and scopes (comma-separated; the CLI's default when unset). */
  name?: string
  scopes?: string
  /** Run on the store before the token and the service (an import, a webhook subscriber). */
  prepare?: (env: Record<string, string>) => Promise<void>
  /** The service's own environment from the store's (e.g. diskFaultEnv). */
  serveEnv?: (env: Record<string, string>) => Record<string, string>
  args?: string[]
  fileLimit?: number
}

/**
 * A fresh store, a token as `tokens create` stores one and `plant-store serve` as a process: the
 * start of every test that drives the service as an operator runs it. Stop it with stopService.
 */
export async function startServiceProcess(
  store: StoreKind,
  { env: extra, name = 'test', scopes, prepare, serveEnv, args = [], fileLimit }: StartProcessOptions = {},
): Promise<StartedProcess> {
  const env = await serviceEnv(store, extra)
  await prepare?.(env)
  const token = await createToken(env, name, scopes)
  const service = await spawnService(serveEnv ? serveEnv(env) : env, args, { fileLimit })
  return { env, token, service }
}

/**
 * SIGTERM, then SIGKILL if the service has not exited within `graceMs`. Resolves with its exit
 * code, or null when it had to be killed (or died of a signal).
 */
export async function stopService(service: SpawnedService, graceMs = 20_000): Promise<number | null> {
  if (service.child.exitCode !== null || service.child.signalCode !== null) return service.child.exitCode
  service.child.kill('SIGTERM')
  const code = await Promise.race([
    service.exited,
    sleep(graceMs, undefined, { ref: false }).then(() => 'timeout' as const),
  ])
  if (code !== 'timeout') return code
  service.child.kill('SIGKILL')
  await service.exited
  return null
}

export interface CliResult {
  code: number
  stdout: string
  stderr: string
}

/** Runs the CLI the way an operator does. */
export function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [cliPath, ...args],
      // A command that hangs fails its test (code 124, as timeout(1) says) instead of the suite.
      { env: { ...process.env, ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error ? (error.killed ? 124 : typeof error.code === 'number' ? error.code : 1) : 0
        resolve({ code, stdout, stderr })
      },
    )
  })
}

/** The store that a service with `env` would open, opened in this process (close it when done). */
export async function openStore(env: Record<string, string>): Promise<Storage> {
  const [{ loadConfig }, { openStorage }] = await Promise.all([
    import('../src/config.js'),
    import('../src/storage/open.js'),
  ])
  return openStorage(loadConfig(env))
}

/**
 * An API token stored as `tokens create` stores one (the default scopes, or `scopes`), from this
 * process: a CLI process costs some 0.4 CPU seconds, and cli-tokens.test.ts runs the command itself.
 */
export async function createToken(
  env: Record<string, string>,
  name: string,
  scopes?: string,
): Promise<string> {
  const storage = await openStore(env)
  try {
    return await issueToken(storage, scopes ? (scopes.split(',') as Scope[]) : DEFAULT_SCOPES, null, name)
  } finally {
    await storage.close()
  }
}

/** PLANT_STORE_REQUIRE_ALL_TESTS=1 (CI sets it): a suite that cannot run fails instead of skipping. */
export function mustRunEverything(): boolean {
  return !['', '0', 'false'].includes((process.env.PLANT_STORE_REQUIRE_ALL_TESTS ?? '').toLowerCase())
}

/**
 * The `skip` option for a suite that needs `requirement`: false when it is `available`, else the
 * reason (what is missing and how to provide it), so node:test reports a skip, never a pass. Under
 * PLANT_STORE_REQUIRE_ALL_TESTS a missing requirement throws, failing the file.
 */
export function skipUnless(available: boolean, requirement: string, hint: string): false | string {
  if (available) return false
  if (mustRunEverything())
    throw new Error(`${requirement} is missing (${hint}); PLANT_STORE_REQUIRE_ALL_TESTS is set`)
  return `${requirement} is missing (${hint})`
}

/**
 * For a suite registered under a condition: when what it needs is missing, a skipped suite of that
 * name with the reason stands in for it (a failure under PLANT_STORE_REQUIRE_ALL_TESTS).
 */
export function suiteRunsHere(suite: string, available: boolean, requirement: string, hint: string): boolean {
  const skip = skipUnless(available, requirement, hint)
  if (skip) describe(suite, { skip }, () => {})
  return skip === false
}

export const postgresHint = 'export TEST_DATABASE_URL="$(scripts/pg-test-server.sh start DIR PORT)"'

/** A TCP port free on 127.0.0.1 right now, for servers the tests start themselves. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

/**
 * Polls until `check` returns something truthy; fails after `timeoutMs` naming `what`. A check
 * that throws is tried again (a CLI or a server may not be up yet); the last error is in the
 * timeout's message.
 */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 15_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      const value = await check()
      if (value) return value as NonNullable<T>
    } catch (error) {
      last = error
    }
    if (Date.now() > deadline) {
      const why = last === undefined ? '' : ` (last error: ${String(last)})`
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`)
    }
    await sleep(25)
  }
}
