// The stores under test: a SQLite file or a PostgreSQL database per (store, size), migrated by the
// service's own CLI, optionally pre-filled in bulk, each with a bench token of its own.
import { execFile, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import Database from 'better-sqlite3'
import pg from 'pg'
import { idStep } from './stored-ids.mjs'
import { track } from './proc.mjs'

const execFileAsync = promisify(execFile)

export const ROOT = fileURLToPath(new URL('../..', import.meta.url))
/** What `npm start` runs: the bundled build (scripts/bundle.mjs). */
export const BUILT_CLI = path.join(ROOT, 'dist', 'bundle', 'main.js')

/**
 * The CLI every child runs. run.mjs points it at a private copy of dist/bundle made at start, so that
 * a rebuild during the run (other work on the same tree) cannot change the code under test.
 */
export const service = { cli: BUILT_CLI }

/** Runs the service's CLI (`migrate`, `tokens create`, ...) and returns its stdout, trimmed. */
export function cli(args, env) {
  const result = spawnSync(process.execPath, [service.cli, ...args], {
    env,
    encoding: 'utf8',
    timeout: 120_000,
  })
  if (result.status !== 0) {
    throw new Error(
      `plant-store ${args.join(' ')} failed (${result.status ?? result.signal}):\n${result.stderr}`,
    )
  }
  return result.stdout.trim()
}

function createToken(env) {
  const token = cli(
    ['tokens', 'create', '--name', 'bench', '--scopes', 'plants:read,plants:write,metrics:read'],
    env,
  )
    .split('\n')
    .at(-1)
    ?.trim()
  if (!token) throw new Error('tokens create printed no token')
  return token
}

/** Creates, migrates and (when plants > 0) bulk-fills a SQLite store; returns its description. */
export async function prepareSqlite({ dir, id, plants, env }) {
  const file = path.join(dir, `${id}.db`)
  const storeEnv = { ...env, PLANT_STORE_DB: file }
  delete storeEnv.DATABASE_URL
  cli(['migrate'], storeEnv)
  let prefillMs = 0
  if (plants > 0) {
    const started = performance.now()
    const script = path.join(ROOT, 'bench', 'prefill-sqlite.mjs')
    const fill = execFileAsync(process.execPath, [script, file, String(plants)], { timeout: 15 * 60_000 })
    track(fill.child)
    await fill
    prefillMs = performance.now() - started
  }
  return {
    store: 'sqlite',
    file,
    env: storeEnv,
    token: createToken(storeEnv),
    plants,
    prefillMs,
    readMax: plants,
    idStep: idStep(plants),
  }
}

/** Adds plants 1..count (those missing) to a SQLite store, while the service may be running. */
export function seedSqlite(config, count) {
  const db = new Database(config.file)
  db.pragma('busy_timeout = 10000')
  const insert = db.prepare(
    "INSERT INTO plants (id, name, tag, created_at) VALUES (?, 'plant ' || ?, 'tag' || (? % 100), ?) ON CONFLICT (id) DO NOTHING",
  )
  const now = Date.now()
  db.transaction(() => {
    for (let i = 1n; i <= BigInt(count); i++) insert.run(i, i, i, now)
  }).immediate()
  db.close()
  config.readMax = Math.max(config.readMax, count)
}

/** Starts the throwaway PostgreSQL of scripts/pg-test-server.sh; resolves to its URL and postmaster pid. */
export function startPostgres({ dir, port, cpu }) {
  const script = path.join(ROOT, 'scripts', 'pg-test-server.sh')
  const argv =
    cpu === undefined
      ? [script, 'start', dir, String(port)]
      : ['-c', String(cpu), 'bash', script, 'start', dir, String(port)]
  const result = spawnSync(cpu === undefined ? 'bash' : 'taskset', argv, {
    encoding: 'utf8',
    timeout: 600_000,
  })
  if (result.status !== 0) throw new Error(`pg-test-server.sh start failed:\n${result.stderr}`)
  const url = result.stdout.trim().split('\n').at(-1)
  const pidFile = path.join(dir, 'data', 'postmaster.pid')
  const postmasterPid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0])
  const version = spawnSync('psql', ['--version'], { encoding: 'utf8' }).stdout?.trim()
  return { url, postmasterPid, version }
}

export function stopPostgres(dir) {
  spawnSync('bash', [path.join(ROOT, 'scripts', 'pg-test-server.sh'), 'stop', dir], {
    stdio: 'ignore',
    timeout: 120_000,
  })
}

const withDatabase = (url, name) => {
  const parsed = new URL(url)
  parsed.pathname = `/${name}`
  return parsed.toString()
}

/** One connection; `unsafe(text)` resolves to the rows, `end()` closes it. */
const connect = (url) => {
  const pool = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: 30_000 })
  pool.on('error', () => {})
  return { unsafe: async (text) => (await pool.query(text)).rows, end: () => pool.end() }
}

/**
 * Creates a fresh database `name` on the server of serverUrl, migrates it with the service's CLI
 * and, when plants > 0, fills it with INSERT ... SELECT generate_series (ids spread as in
 * stored-ids.mjs). The plants table's
 * indexes and key are dropped for the load and rebuilt from their own definitions afterwards
 * (faster than maintaining them row by row), then VACUUM ANALYZE and CHECKPOINT so neither
 * autovacuum nor a checkpoint of the bulk load runs during the measurements.
 */
export async function preparePostgres({ serverUrl, name, plants, env }) {
  const admin = connect(withDatabase(serverUrl, 'postgres'))
  try {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name}`)
    await admin.unsafe(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  const url = withDatabase(serverUrl, name)
  const storeEnv = { ...env, DATABASE_URL: url }
  delete storeEnv.PLANT_STORE_DB
  cli(['migrate'], storeEnv)
  let prefillMs = 0
  if (plants > 0) {
    const started = performance.now()
    const sql = connect(url)
    try {
      const constraints = await sql.unsafe(
        `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint
         WHERE conrelid = 'plants'::regclass AND contype IN ('p', 'u')`,
      )
      const indexes = (
        await sql.unsafe(
          `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'plants'`,
        )
      ).filter((index) => !constraints.some((c) => c.conname === index.indexname))
      for (const index of indexes) await sql.unsafe(`DROP INDEX ${index.indexname}`)
      for (const c of constraints) await sql.unsafe(`ALTER TABLE plants DROP CONSTRAINT ${c.conname}`)
      await sql.unsafe(`INSERT INTO plants (id, name, tag, created_at)
        SELECT i * ${idStep(plants)}, 'plant ' || i, 'tag' || (i % 100), now()
        FROM generate_series(1::bigint, ${plants}) AS i`)
      await sql.unsafe(`SET maintenance_work_mem = '512MB'`)
      for (const c of constraints) await sql.unsafe(`ALTER TABLE plants ADD CONSTRAINT ${c.conname} ${c.def}`)
      for (const index of indexes) await sql.unsafe(index.indexdef)
      await sql.unsafe('VACUUM ANALYZE plants')
      await sql.unsafe('CHECKPOINT')
    } finally {
      await sql.end()
    }
    prefillMs = performance.now() - started
  }
  return {
    store: 'postgres',
    url,
    env: storeEnv,
    token: createToken(storeEnv),
    plants,
    prefillMs,
    readMax: plants,
    idStep: idStep(plants),
  }
}

/** Adds plants 1..count (those missing) to a PostgreSQL store. */
export async function seedPostgres(config, count) {
  const sql = connect(config.url)
  try {
    await sql.unsafe(`INSERT INTO plants (id, name, tag, created_at)
      SELECT i, 'plant ' || i, 'tag' || (i % 100), now() FROM generate_series(1, ${count}) AS i
      ON CONFLICT (id) DO NOTHING`)
  } finally {
    await sql.end()
  }
  config.readMax = Math.max(config.readMax, count)
}

/** The SQLite library version the service links (better-sqlite3's bundled SQLite). */
export function sqliteVersion() {
  const db = new Database(':memory:')
  const version = db.prepare('SELECT sqlite_version() AS v').get().v
  db.close()
  return version
}
