#!/usr/bin/env node
// The Plant Store benchmark (`npm run bench`, `npm run bench:quick`). See docs/performance.md.
//
// Starts, on 127.0.0.1 only, a bare node:http baseline (bench/baseline.mjs) and one fresh service
// process per (store, size), drives each with autocannon from this process, interleaving rounds
// so that machine drift hits all of them, and reports medians and service/baseline ratios as
// Markdown (stdout and .bench/) and JSON (.bench/results-<timestamp>.json). Every load run has a
// fixed duration and a watchdog kills everything after --max-time, so it always stops by itself.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { runLoad, SCENARIOS } from './lib/load.mjs'
import { freePort, hasTaskset, killAllChildren, pinSelf, stopProcess } from './lib/proc.mjs'
import { startNodeFlags } from '../scripts/start-node-flags.mjs'
import { measureRun } from './lib/measure.mjs'
import { startService, startYardstick } from './lib/servers.mjs'
import { busyBeforeRun, gitInfo, machine, plantsThatFit } from './lib/machine.mjs'
import { estimateSeconds, parseOptions } from './lib/options.mjs'
import { recordProfiles } from './lib/profile.mjs'
import { formatCount, REFERENCE } from './lib/report.mjs'
import { printSavedReport, publishResults } from './lib/results.mjs'
import {
  BUILT_CLI,
  preparePostgres,
  prepareSqlite,
  ROOT,
  seedPostgres,
  seedSqlite,
  service,
  startPostgres,
  stopPostgres,
} from './lib/stores.mjs'

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

async function main() {
  const options = parseOptions()
  if (options.report) return printSavedReport(options.report)
  const startedAt = new Date()
  const started = performance.now()
  if (!fs.existsSync(BUILT_CLI))
    die(2, `${path.relative(ROOT, BUILT_CLI)} is missing: run \`npm run build\` first`)
  const host = machine()

  // At info, SQLite's empty store runs a second time at warn: the request log's cost, beside it.
  const logCostRow =
    options.logLevel === 'info' && options.stores.includes('sqlite') && options.sizes.includes('empty')
  const targetsPerRound = 1 + options.stores.length * options.sizes.length + (logCostRow ? 1 : 0)
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
  let idleCheck = await busyBeforeRun(host.cpus, options.waitIdle, log)
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
  if (logCostRow) {
    const id = 'sqlite-empty-warn'
    const env = { ...baseEnv, LOG_LEVEL: 'warn' }
    jobs.push(
      prepareSqlite({ dir: tmpDir, id, plants: 0, env }).then((c) => ({
        id,
        size: 'empty',
        ...c,
        logLevel: 'warn',
      })),
    )
  }
  const configs = await Promise.all(jobs)
  for (const c of configs) if (c.prefillMs) log(`${c.id}: pre-filled in ${(c.prefillMs / 1000).toFixed(1)} s`)
  const prepareSeconds = (performance.now() - prepareStarted) / 1000

  // ---- servers: the baseline, then one service per store; start-up timed from spawn to 200.
  const baseToken = configs[0].token
  const yardstick = { token: baseToken, readMax: options.readSeed, logDir: tmpDir, cpu: serverCpu }
  const servers = [await startYardstick({ id: 'baseline', script: 'baseline.mjs', ...yardstick })]
  if (options.reference)
    servers.push(await startYardstick({ id: REFERENCE.id, script: 'fastify-reference.mjs', ...yardstick }))
  for (const config of configs) {
    servers.push(
      await startService({ config, cli: CLI, nodeArgs: serviceNodeArgs, logDir: tmpDir, cpu: serverCpu }),
    )
    log(
      `${config.id}: /healthz after ${Math.round(config.startupMs)} ms, /readyz after ${Math.round(config.readyMs)} ms ` +
        `(median of ${config.startupSamplesMs.join(', ')})`,
    )
  }

  // ---- the rounds.
  const runs = []
  let seeded = false
  const measure = async (server, scenario, round, position) => {
    const run = await measureRun({
      server,
      scenario,
      round,
      position,
      connections: options.connections,
      duration: options.duration,
      postmasterPid: server.config?.store === 'postgres' ? pg.postmasterPid : undefined,
    })
    runs.push(run)
    const failed = run.non2xx + run.errors
    log(
      `${scenario} r${round + 1} ${server.id.padEnd(15)} ${Math.round(run.rps).toString().padStart(6)} req/s ` +
        `p50 ${run.latencyMs.p50} ms p99 ${run.latencyMs.p99} ms` +
        `${failed ? ` FAILED ${failed} (${JSON.stringify(run.statusCodes)}, errors ${run.errors})` : ''}`,
    )
    return run
  }

  for (const scenario of options.scenarios) {
    if (SCENARIOS[scenario].reads && !seeded) {
      // Reads need stored plants: the empty stores get ids 1..readSeed (1 apart) once their create
      // runs are done.
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
          idStep: server.config?.idStep,
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
      profiles.push(
        ...(await recordProfiles({
          config,
          scenarios: options.scenarios,
          cli: UNBUNDLED_CLI,
          nodeArgs: serviceNodeArgs,
          profDir,
          logDir: tmpDir,
          cpu: serverCpu,
          connections: options.connections,
          seconds: options.profileSeconds,
          log,
        })),
      )
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
    configs: configs.map(
      ({ id, store, size, plants, prefillMs, startupMs, readyMs, startupSamplesMs, logLevel }) => ({
        id,
        store,
        logLevel,
        size,
        plants,
        prefillMs,
        startupMs,
        readyMs,
        startupSamplesMs,
      }),
    ),
    references: options.reference ? [REFERENCE] : [],
    baselineStartupMs: servers[0].startupMs,
    runs,
    profiles,
  }
  const jsonFile = publishResults(results, outDir)
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
