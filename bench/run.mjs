#!/usr/bin/env node
// The Plant Store benchmark (`npm run bench`, `npm run bench:quick`). See docs/performance.md.
//
// Starts, on 127.0.0.1 only, a bare node:http baseline (bench/baseline.mjs) and one fresh service
// process per (store, size), drives each with autocannon from this process, interleaving rounds
// so that machine drift hits all of them, and reports medians and service/baseline ratios as
// Markdown (stdout and .bench/) and JSON (.bench/results-<timestamp>.json). Every load run has a
// fixed duration and a watchdog kills everything after --max-time, so it always stops by itself.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { runLoad, SCENARIOS } from './lib/load.mjs'
import {
  cpuSeconds,
  freePort,
  hasTaskset,
  killAllChildren,
  machineBusySeconds,
  ownCpuSeconds,
  peakRssMb,
  pinSelf,
  resetPeakRss,
  startNode,
  stopProcess,
  treeCpuSeconds,
  waitFor200,
} from './lib/proc.mjs'
import { startNodeFlags } from '../scripts/start-node-flags.mjs'
import { summarizeProfile } from './lib/profile.mjs'
import { evaluateTargets, formatCount, markdown, median, REFERENCE, summarize } from './lib/report.mjs'
import {
  BUILT_CLI,
  preparePostgres,
  prepareSqlite,
  ROOT,
  seedPostgres,
  seedSqlite,
  service,
  sqliteVersion,
  startPostgres,
  stopPostgres,
} from './lib/stores.mjs'

const USAGE = `Usage: node bench/run.mjs [options]        (build first: npm run build)

  --quick               SQLite only, empty store, create-seq/get-id/list-100, 3 rounds of 1.5 s (< 1 min)
  --duration S          seconds per measured run (default 1.5)
  --warmup S            seconds of unrecorded load per target before each scenario (default 0.75; quick 0.5)
  --rounds N            interleaved rounds per scenario (default 3)
  --connections N       concurrent connections (default 64)
  --scenarios LIST      ${Object.keys(SCENARIOS).join(',')} (default: all)
  --stores LIST         sqlite,postgres (default: both)
  --sizes LIST          empty,big (default: both)
  --plants N            plants pre-filled in the "big" stores (default 10000000, the issue's size;
                        fewer, with a warning, when the temporary folder's disk cannot hold them)
  --big                 with --quick, also measure the big stores (the default run always does)
  --read-seed N         plants added to the empty stores before the read scenarios (default 10000)
  --reference           also measure bench/fastify-reference.mjs, the baseline's routes on bare Fastify
                        (schema validation, no store), to show what the framework alone costs
  --profile             also record a CPU profile of the service under each selected scenario (SQLite)
  --profile-seconds S   load per profile (default 5)
  --sqlite-sync MODE    full (fsync per commit, default) or normal
  --log-level LEVEL     the service's LOG_LEVEL (default warn; info logs one line per request)
  --node-flags="FLAGS"  Node flags for the service instead of those of \`npm start\` (to compare them)
  --max-time S          watchdog: kill everything and exit 3 after S seconds (default: from the plan)
  --wait-idle S         first wait up to S seconds for the machine to be idle (3 x 2 s under 25% busy)
  --no-pin              do not pin load generator and servers to separate CPUs with taskset
  --keep                keep the temporary directory (stores, logs)
  --report FILE         only print the Markdown report of a saved .bench/results-*.json again

Environment variables other than PORT, HOST, PLANT_STORE_DB, DATABASE_URL, LOG_LEVEL and
SQLITE_SYNC pass through to the service (e.g. DB_POOL_SIZE).`

function parseOptions() {
  // A bad flag is a wrong command line like any other: exit 2 with the usage, not a stack trace.
  try {
    return readOptions()
  } catch (error) {
    if (error?.code?.startsWith?.('ERR_PARSE_ARGS')) usage(error.message)
    throw error
  }
}

function readOptions() {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      rounds: { type: 'string' },
      connections: { type: 'string' },
      scenarios: { type: 'string' },
      stores: { type: 'string' },
      sizes: { type: 'string' },
      plants: { type: 'string' },
      big: { type: 'boolean', default: false },
      'read-seed': { type: 'string' },
      reference: { type: 'boolean', default: false },
      profile: { type: 'boolean', default: false },
      'profile-seconds': { type: 'string' },
      'sqlite-sync': { type: 'string' },
      'log-level': { type: 'string' },
      'node-flags': { type: 'string' },
      'max-time': { type: 'string' },
      'wait-idle': { type: 'string' },
      'no-pin': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      report: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  })
  if (values.help) {
    process.stdout.write(`${USAGE}\n`)
    process.exit(0)
  }
  if (values.report) {
    // Re-render a saved run with the current report code (rows and targets are recomputed).
    const results = JSON.parse(fs.readFileSync(values.report, 'utf8'))
    results.rows = summarize(results)
    results.targets = evaluateTargets(results, results.rows)
    process.stdout.write(`${markdown(results)}\n`)
    process.exit(0)
  }
  const quick = values.quick
  const number = (name, fallback, min, max) => {
    const raw = values[name]
    if (raw === undefined) return fallback
    const value = Number(raw)
    if (!Number.isFinite(value) || value < min || value > max)
      usage(`--${name} must be a number from ${min} to ${max}`)
    return value
  }
  const list = (name, fallback, allowed) => {
    const items = (values[name] ?? fallback.join(','))
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
    const unknown = items.filter((item) => !allowed.includes(item))
    if (unknown.length || items.length === 0) usage(`--${name} takes a list of ${allowed.join(', ')}`)
    return [...new Set(items)]
  }
  const options = {
    quick,
    // 1.5 s runs keep `npm run bench`, build included, under 5 minutes on a busy machine (a probe
    // measured 5m39s with 2 s runs at load average 3-8).
    duration: number('duration', 1.5, 0.5, 600),
    warmup: number('warmup', quick ? 0.5 : 0.75, 0, 60),
    rounds: Math.round(number('rounds', 3, 1, 50)),
    connections: Math.round(number('connections', 64, 1, 10_000)),
    scenarios: list(
      'scenarios',
      quick ? ['create-seq', 'get-id', 'list-100'] : Object.keys(SCENARIOS),
      Object.keys(SCENARIOS),
    ),
    stores: list('stores', quick ? ['sqlite'] : ['sqlite', 'postgres'], ['sqlite', 'postgres']),
    sizes: list('sizes', quick && !values.big ? ['empty'] : ['empty', 'big'], ['empty', 'big']),
    plants: Math.round(number('plants', 10_000_000, 1, 1e9)),
    readSeed: Math.round(number('read-seed', 10_000, 1, 1e8)),
    reference: values.reference,
    profile: values.profile,
    profileSeconds: number('profile-seconds', 5, 1, 120),
    sqliteSync: values['sqlite-sync'] ?? 'full',
    logLevel: values['log-level'] ?? 'warn',
    nodeFlags: values['node-flags'],
    maxTime: values['max-time'] === undefined ? undefined : number('max-time', 0, 10, 86_400),
    waitIdle: number('wait-idle', 0, 0, 3600),
    pin: !values['no-pin'],
    keep: values.keep,
  }
  if (!['full', 'normal'].includes(options.sqliteSync)) usage('--sqlite-sync must be full or normal')
  return options
}

/**
 * Whether the service will write SQLite's WAL through native/wal-coalesce.c, asked of the built
 * code itself: its reading of SQLITE_WAL_COALESCE (passed through) and its library's path.
 */
async function walCoalescing() {
  const { loadConfig } = await import('../dist/src/config.js')
  const { WAL_COALESCE_LIBRARY } = await import('../dist/src/storage/sqlite/wal-coalescing.js')
  let wanted
  try {
    wanted = loadConfig({ SQLITE_WAL_COALESCE: process.env.SQLITE_WAL_COALESCE }).sqliteWalCoalesce
  } catch (error) {
    // The service would refuse to start on it; say so before any store is filled.
    die(2, `bench: ${error.message}`)
  }
  if (!wanted) return 'no (SQLITE_WAL_COALESCE)'
  return fs.existsSync(path.join(ROOT, WAL_COALESCE_LIBRARY)) ? 'yes' : 'no (library not built)'
}

function usage(message) {
  process.stderr.write(`bench: ${message}\n\n${USAGE}\n`)
  process.exit(2)
}

const log = (message) =>
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`)

// ---- cleanup: whatever happens, no child outlives the run and the temporary PostgreSQL stops.
let tmpDir
let snapshotDir
let pgDir
let keepTmp = false
let cleanedUp = false
function cleanup() {
  if (cleanedUp) return
  cleanedUp = true
  killAllChildren()
  if (pgDir) stopPostgres(pgDir)
  if (tmpDir && !keepTmp) fs.rmSync(tmpDir, { recursive: true, force: true })
  if (snapshotDir) fs.rmSync(snapshotDir, { recursive: true, force: true })
}
function die(code, message) {
  log(message)
  cleanup()
  process.exit(code)
}
process.on('exit', cleanup)
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'])
  process.on(signal, () => die(130, `stopped by ${signal}`))

/** Seconds the plan should take, for the watchdog and the log. */
function estimateSeconds(options, targets) {
  const runs = options.scenarios.length * options.rounds * targets
  const loadSeconds =
    runs * (options.duration + 0.15) + options.scenarios.length * targets * (options.warmup + 0.15)
  const prefill = options.sizes.includes('big')
    ? (options.plants / 10_000_000) * (options.stores.includes('postgres') ? 45 : 20)
    : 0
  const profile = options.profile ? options.scenarios.length * (options.profileSeconds + 3) : 0
  return loadSeconds + prefill + profile + 3.5 * targets + 5
}

/**
 * Disk a pre-filled plant takes, with room to spare: about 56 bytes in the SQLite file, and in
 * PostgreSQL the heap, both indexes and the WAL written while they are built (measured at 10M).
 */
const BYTES_PER_PLANT = { sqlite: 100, postgres: 300 }
/** Left free on the disk whatever the stores take. */
const DISK_RESERVE_BYTES = 1024 ** 3

/** options.plants, or the most the disk of `dir` holds (in whole millions, thousands below that). */
function plantsThatFit(dir, options) {
  const { bavail, bsize } = fs.statfsSync(dir)
  const perPlant = options.stores.reduce((sum, store) => sum + BYTES_PER_PLANT[store], 0)
  const fitting = Math.floor((bavail * bsize - DISK_RESERVE_BYTES) / perPlant)
  if (fitting >= options.plants) return options.plants
  const unit = fitting >= 1_000_000 ? 1_000_000 : 1000
  return Math.max(1000, Math.floor(fitting / unit) * unit)
}

function machine() {
  const cpus = os.cpus()
  return {
    cpuModel: cpus[0]?.model ?? 'unknown',
    cpus: os.availableParallelism?.() ?? cpus.length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    kernel: `${os.type()} ${os.release()}`,
    sqlite: sqliteVersion(),
  }
}

function gitInfo() {
  const run = (args) => {
    const out = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' })
    return out.status === 0 ? out.stdout.trim() : undefined
  }
  return {
    commit: run(['rev-parse', '--short', 'HEAD']),
    dirty: (run(['status', '--porcelain', 'src']) ?? '') !== '',
  }
}

async function main() {
  const options = parseOptions()
  const startedAt = new Date()
  const started = performance.now()
  if (!fs.existsSync(BUILT_CLI))
    die(2, `${path.relative(ROOT, BUILT_CLI)} is missing: run \`npm run build\` first`)
  options.walCoalescing = await walCoalescing()
  const host = machine()

  const targetsPerRound = 1 + options.stores.length * options.sizes.length
  const estimate = estimateSeconds(options, targetsPerRound)
  const maxTime = options.maxTime ?? Math.ceil(estimate * 1.5 + 60 + options.waitIdle)
  log(
    `plan: ${options.scenarios.join(', ')} x ${options.stores.join('+')} x ${options.sizes.join('+')}` +
      `${options.sizes.includes('big') ? ` (big = ${formatCount(options.plants)} plants)` : ''}, ` +
      `${options.rounds} rounds of ${options.duration} s, ${options.connections} connections; ` +
      `about ${Math.round(estimate)} s, watchdog at ${maxTime} s`,
  )
  const watchdog = setTimeout(
    () => die(3, `watchdog: still running after ${maxTime} s, killed everything`),
    maxTime * 1000,
  )
  watchdog.unref()

  tmpDir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-bench-'))
  keepTmp = options.keep
  // PostgreSQL runs as the postgres user and must reach its directory inside this one.
  fs.chmodSync(tmpDir, 0o755)
  const outDir = path.join(ROOT, '.bench')
  fs.mkdirSync(outDir, { recursive: true })
  // A private copy of the build (inside the project, so node_modules still resolves): a rebuild of
  // dist/ while this runs cannot swap code under the running services.
  snapshotDir = path.join(outDir, `run-${process.pid}`)
  for (const part of ['bundle', 'src'])
    fs.cpSync(path.join(ROOT, 'dist', part), path.join(snapshotDir, 'dist', part), { recursive: true })
  service.cli = path.join(snapshotDir, 'dist', 'bundle', 'main.js')
  const CLI = service.cli
  // Profiles run the same code unbundled: in the bundle every frame would sit in one file, and the
  // summary could not tell the service's functions from fastify's or Node's.
  const UNBUNDLED_CLI = path.join(snapshotDir, 'dist', 'src', 'cli', 'main.js')
  // The service runs with the Node flags `npm start` gives it (package.json), so the benchmark
  // measures what users run, unless --node-flags names others.
  const serviceNodeArgs =
    options.nodeFlags?.split(/\s+/).filter((word) => word.startsWith('--')) ?? startNodeFlags()

  // How busy the machine is before we start: other work on it skews every number.
  const busyPercent = async (seconds) => {
    const busy0 = machineBusySeconds()
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000))
    const busy1 = machineBusySeconds()
    return busy0 === undefined ? undefined : (100 * (busy1 - busy0)) / seconds / host.cpus
  }
  let idleCheck = await busyPercent(1)
  if (options.waitIdle > 0 && idleCheck !== undefined) {
    // Idle means three quiet 2 s samples in a row: test suites run in bursts.
    const waitUntil = performance.now() + options.waitIdle * 1000
    let quiet = 0
    while (quiet < 3 && performance.now() < waitUntil) {
      idleCheck = await busyPercent(2)
      quiet = idleCheck <= 25 ? quiet + 1 : 0
      if (quiet === 0) log(`waiting for the machine to be idle: ${idleCheck.toFixed(0)}% busy`)
    }
  }
  if (idleCheck !== undefined) {
    log(
      `machine busy before the run: ${idleCheck.toFixed(0)}% of ${host.cpus} CPUs, load average ${os.loadavg()[0].toFixed(2)}`,
    )
    if (idleCheck > 20) log('warning: the machine is busy with other work; expect noisy, pessimistic numbers')
  }
  const loadAverageStart = os.loadavg()

  // Load generator on CPU 0, servers (and PostgreSQL) on CPU 1, as in the issue's setup.
  let serverCpu
  let pinning = 'not pinned'
  if (options.pin && os.cpus().length >= 2 && hasTaskset() && pinSelf(0)) {
    serverCpu = 1
    pinning = 'load generator pinned to CPU 0, servers (and PostgreSQL) to CPU 1'
  }
  log(pinning)

  if (options.sizes.includes('big')) {
    const fitting = plantsThatFit(tmpDir, options)
    if (fitting < options.plants) {
      log(
        `warning: ${formatCount(options.plants)} plants would not fit on the disk of ${os.tmpdir()}; ` +
          `the big stores get ${formatCount(fitting)}`,
      )
      options.plants = fitting
    }
  }

  const baseEnv = {
    ...process.env,
    HOST: '127.0.0.1',
    LOG_LEVEL: options.logLevel,
    SQLITE_SYNC: options.sqliteSync,
  }
  for (const name of ['PORT', 'PLANT_STORE_DB', 'DATABASE_URL']) delete baseEnv[name]
  baseEnv.WEBHOOK_WORKER ??= 'true'

  // ---- stores: created, migrated and pre-filled in parallel (SQLite in a child, PostgreSQL server-side).
  const prepareStarted = performance.now()
  const jobs = []
  let pg
  if (options.stores.includes('postgres')) {
    pgDir = path.join(tmpDir, 'pg')
    const port = await freePort()
    log(`starting PostgreSQL on 127.0.0.1:${port}`)
    try {
      pg = startPostgres({ dir: pgDir, port, cpu: serverCpu })
      log(`${pg.version ?? 'PostgreSQL'} at ${pg.url}`)
    } catch (error) {
      // The SQLite half still means something: measure it rather than fail the whole run.
      log(`PostgreSQL could not be started, so its rows are skipped (--stores sqlite says so up front):`)
      log(`  ${String(error.message).split('\n').filter(Boolean).slice(-3).join('\n  ')}`)
      options.stores = options.stores.filter((store) => store !== 'postgres')
      if (options.stores.length === 0) throw error
    }
  }
  for (const store of options.stores) {
    for (const size of options.sizes) {
      const id = `${store}-${size}`
      const plants = size === 'big' ? options.plants : 0
      if (plants) log(`pre-filling ${id} with ${formatCount(plants)} plants`)
      const job =
        store === 'sqlite'
          ? prepareSqlite({ dir: tmpDir, id, plants, env: baseEnv })
          : preparePostgres({
              serverUrl: pg.url,
              name: `plant_store_bench_${size}_test`,
              plants,
              env: baseEnv,
            })
      jobs.push(job.then((config) => ({ id, size, ...config })))
    }
  }
  const configs = await Promise.all(jobs)
  for (const c of configs) if (c.prefillMs) log(`${c.id}: pre-filled in ${(c.prefillMs / 1000).toFixed(1)} s`)
  const prepareSeconds = (performance.now() - prepareStarted) / 1000

  // ---- servers: the baseline, then one service per store; start-up timed from spawn to 200.
  const baseToken = configs[0].token
  const servers = []
  {
    const port = await freePort()
    const proc = startNode({
      name: 'baseline',
      args: [path.join(ROOT, 'bench', 'baseline.mjs')],
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', BENCH_TOKEN: baseToken },
      logFile: path.join(tmpDir, 'baseline.log'),
      cpu: serverCpu,
    })
    const url = `http://127.0.0.1:${port}`
    const startupMs = await waitFor200(proc, url, '/healthz', 10_000)
    servers.push({ id: 'baseline', proc, url, token: baseToken, readMax: options.readSeed, startupMs })
  }
  if (options.reference) {
    const port = await freePort()
    const proc = startNode({
      name: REFERENCE.id,
      args: [path.join(ROOT, 'bench', 'fastify-reference.mjs')],
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', BENCH_TOKEN: baseToken },
      logFile: path.join(tmpDir, `${REFERENCE.id}.log`),
      cpu: serverCpu,
    })
    const url = `http://127.0.0.1:${port}`
    await waitFor200(proc, url, '/healthz', 10_000)
    servers.push({ id: REFERENCE.id, proc, url, token: baseToken, readMax: options.readSeed })
  }
  // Each service is started three times (two throwaway starts, then the one that serves the
  // rounds) and the median time from spawn to /healthz and /readyz answering 200 is reported.
  const startService = async (config, name) => {
    const port = await freePort()
    const proc = startNode({
      name,
      args: [CLI, 'serve'],
      nodeArgs: serviceNodeArgs,
      env: { ...config.env, PORT: String(port) },
      logFile: path.join(tmpDir, `${name}.log`),
      cpu: serverCpu,
    })
    const url = `http://127.0.0.1:${port}`
    const healthMs = await waitFor200(proc, url, '/healthz', 30_000)
    const readyMs = await waitFor200(proc, url, '/readyz', 30_000)
    return { proc, url, healthMs, readyMs }
  }
  for (const config of configs) {
    const samples = []
    for (let i = 0; i < 2; i++) {
      const started = await startService(config, `${config.id}-start${i + 1}`)
      samples.push(started)
      await stopProcess(started.proc)
    }
    const { proc, url, healthMs, readyMs } = await startService(config, config.id)
    samples.push({ healthMs, readyMs })
    config.startupSamplesMs = samples.map((s) => Math.round(s.readyMs))
    config.startupMs = median(samples.map((s) => s.healthMs))
    config.readyMs = median(samples.map((s) => s.readyMs))
    log(
      `${config.id}: /healthz after ${Math.round(config.startupMs)} ms, /readyz after ${Math.round(config.readyMs)} ms ` +
        `(median of ${config.startupSamplesMs.join(', ')})`,
    )
    servers.push({ id: config.id, proc, url, config })
  }

  // ---- the rounds.
  const runs = []
  let seeded = false
  const measure = async (server, scenario, round, position) => {
    const token = server.config?.token ?? server.token
    const readMax = server.config?.readMax ?? server.readMax
    const pid = server.proc.pid
    const peakReset = resetPeakRss(pid)
    const cpu0 = cpuSeconds(pid)
    const db0 = server.config?.store === 'postgres' ? treeCpuSeconds(pg.postmasterPid) : undefined
    const busy0 = machineBusySeconds()
    const own0 = ownCpuSeconds()
    const t0 = performance.now()
    const result = await runLoad({
      url: server.url,
      scenario,
      token,
      readMax,
      connections: options.connections,
      duration: options.duration,
    })
    const wall = (performance.now() - t0) / 1000
    const cpu1 = cpuSeconds(pid)
    const db1 = db0 === undefined ? undefined : treeCpuSeconds(pg.postmasterPid)
    const busy1 = machineBusySeconds()
    const own1 = ownCpuSeconds()
    // CPU that neither the load generator nor the server (nor its PostgreSQL) used: other work.
    const other =
      busy0 === undefined || cpu0 === undefined || cpu1 === undefined
        ? undefined
        : (100 * (busy1 - busy0 - (own1 - own0) - (cpu1 - cpu0) - (db0 === undefined ? 0 : db1 - db0))) / wall
    if (server.proc.exit)
      throw new Error(`${server.id} died during ${scenario}: ${JSON.stringify(server.proc.exit)}`)
    const run = {
      scenario,
      round,
      position,
      target: server.id,
      ...result,
      readMax,
      cpuPercent: cpu0 === undefined || cpu1 === undefined ? undefined : (100 * (cpu1 - cpu0)) / wall,
      dbCpuPercent: db0 === undefined || db1 === undefined ? undefined : (100 * (db1 - db0)) / wall,
      loadGeneratorCpuPercent: (100 * (own1 - own0)) / wall,
      otherCpuPercent: other === undefined ? undefined : Math.max(0, other),
      peakRssMb: peakRssMb(pid),
      peakRssSince: peakReset ? 'run' : 'start',
    }
    runs.push(run)
    const failed = result.non2xx + result.errors
    log(
      `${scenario} r${round + 1} ${server.id.padEnd(15)} ${Math.round(result.rps).toString().padStart(6)} req/s ` +
        `p50 ${result.latencyMs.p50} ms p99 ${result.latencyMs.p99} ms` +
        `${failed ? ` FAILED ${failed} (${JSON.stringify(result.statusCodes)}, errors ${result.errors})` : ''}`,
    )
    return run
  }

  for (const scenario of options.scenarios) {
    if (SCENARIOS[scenario].reads && !seeded) {
      // Reads need stored plants: the empty stores get ids 1..readSeed once their create runs are done.
      for (const config of configs.filter((c) => c.size === 'empty')) {
        if (config.store === 'sqlite') seedSqlite(config, options.readSeed)
        else await seedPostgres(config, options.readSeed)
      }
      seeded = true
    }
    if (options.warmup > 0) {
      for (const server of servers) {
        await runLoad({
          url: server.url,
          scenario,
          token: server.config?.token ?? server.token,
          readMax: server.config?.readMax ?? server.readMax,
          connections: options.connections,
          duration: options.warmup,
        })
      }
    }
    for (let round = 0; round < options.rounds; round++) {
      // Alternate the order so neither the baseline nor any store always runs first.
      const order = round % 2 === 0 ? servers : [...servers].reverse()
      for (const [position, server] of order.entries()) await measure(server, scenario, round, position)
    }
  }

  // ---- optional CPU profiles: a fresh service under --cpu-prof per scenario.
  const profiles = []
  if (options.profile) {
    const config = configs.find((c) => c.id === 'sqlite-empty') ?? configs.find((c) => c.store === 'sqlite')
    if (!config) log('--profile needs a SQLite store; skipped')
    else {
      if (config.readMax === 0) seedSqlite(config, options.readSeed)
      const profDir = path.join(outDir, 'prof', startedAt.toISOString().replace(/[:.]/g, '-'))
      fs.mkdirSync(profDir, { recursive: true })
      for (const scenario of options.scenarios) {
        // One directory per scenario: Node writes one profile per thread (main, and any worker).
        const dir = path.join(profDir, scenario)
        fs.mkdirSync(dir, { recursive: true })
        const port = await freePort()
        const proc = startNode({
          name: `profile-${scenario}`,
          args: [UNBUNDLED_CLI, 'serve'],
          nodeArgs: [...serviceNodeArgs, '--cpu-prof', '--cpu-prof-dir', dir],
          env: { ...config.env, PORT: String(port) },
          logFile: path.join(tmpDir, `profile-${scenario}.log`),
          cpu: serverCpu,
        })
        const url = `http://127.0.0.1:${port}`
        await waitFor200(proc, url, '/readyz', 30_000)
        const common = {
          url,
          scenario,
          token: config.token,
          readMax: config.readMax,
          connections: options.connections,
        }
        await runLoad({ ...common, duration: 1 })
        const cpu0 = cpuSeconds(proc.pid)
        const loadStart = performance.now()
        const result = await runLoad({ ...common, duration: options.profileSeconds })
        const loadEnd = performance.now()
        const cpu1 = cpuSeconds(proc.pid)
        await stopProcess(proc)
        const exitAt = performance.now()
        const files = fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))
        if (files.length === 0) log(`profile ${scenario}: no profile written`)
        for (const file of files.sort()) {
          // CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile; thread 0 is the main thread.
          const threadId = Number(file.split('.').at(-3))
          const summary = summarizeProfile(path.join(dir, file), {
            requests: result.ok,
            window: { fromEndUs: (exitAt - loadStart) * 1000, toEndUs: (exitAt - loadEnd) * 1000 },
          })
          const thread = threadId === 0 ? 'main thread' : `worker thread ${threadId}`
          profiles.push({
            scenario,
            config: config.id,
            thread,
            rps: result.rps,
            processCpuPercent: (100 * (cpu1 - cpu0)) / ((loadEnd - loadStart) / 1000),
            ...summary,
          })
          log(
            `profile ${scenario} (${thread}): ${Math.round(result.rps)} req/s, ` +
              `${Math.round(summary.busyUsPerRequest)} µs CPU/request`,
          )
        }
      }
    }
  }

  // ---- stop everything, then report.
  await Promise.all(servers.map((s) => stopProcess(s.proc)))
  if (pgDir) {
    stopPostgres(pgDir)
    pgDir = undefined
  }
  clearTimeout(watchdog)

  const results = {
    startedAt: startedAt.toISOString(),
    wallSeconds: (performance.now() - started) / 1000,
    prepareSeconds,
    options,
    serviceNodeArgs,
    pinning,
    machine: { ...host, postgres: pg?.version },
    busyBeforePercent: idleCheck,
    loadAverage: { start: loadAverageStart, end: os.loadavg() },
    git: gitInfo(),
    configs: configs.map(({ id, store, size, plants, prefillMs, startupMs, readyMs, startupSamplesMs }) => ({
      id,
      store,
      size,
      plants,
      prefillMs,
      startupMs,
      readyMs,
      startupSamplesMs,
    })),
    references: options.reference ? [REFERENCE] : [],
    baselineStartupMs: servers[0].startupMs,
    runs,
    profiles,
  }
  results.rows = summarize(results)
  results.targets = evaluateTargets(results, results.rows)
  const md = markdown(results)
  const stamp = startedAt.toISOString().replace(/[:.]/g, '-')
  const jsonFile = path.join(outDir, `results-${stamp}.json`)
  fs.writeFileSync(jsonFile, `${JSON.stringify(results, null, 2)}\n`)
  fs.writeFileSync(path.join(outDir, `results-${stamp}.md`), `${md}\n`)
  fs.writeFileSync(path.join(outDir, 'latest.md'), `${md}\n`)
  process.stdout.write(`\n${md}\n\n`)
  log(`results: ${path.relative(ROOT, jsonFile)} (wall time ${results.wallSeconds.toFixed(0)} s)`)

  // No speed threshold, but a server that answers errors under load is a broken benchmark.
  const broken = runs.filter((r) => r.ok === 0 || (r.non2xx + r.errors) / (r.ok + r.non2xx + r.errors) > 0.01)
  if (broken.length) {
    die(
      1,
      `${broken.length} run(s) had more than 1% failed requests: ${broken.map((r) => `${r.scenario}/${r.target}`).join(', ')}`,
    )
  }
  cleanup()
}

main().catch((error) =>
  die(1, `failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`),
)
