#!/usr/bin/env node
// Soak test of the PostgreSQL pool: SECONDS (default 60) of steady mixed load through the store
// adapter as the service uses it (80% reads by id, 10% pages of 100 from random cursors, 10%
// creates), from CONCURRENCY (default 64) callers on a pool of DB_POOL_SIZE (default 10).
// It reports operations per 10 s and this process's RSS every 5 s, and fails
// (exit 1) when the last 10 s run below 0.9x of the first 10 s or RSS grows past 1.25x.
// Starts its own PostgreSQL (scripts/pg-test-server.sh) unless DATABASE_URL is set; stops by itself.
// Usage: npm run build && node bench/pg-soak.mjs [--seconds 60] [--concurrency 64]
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { freePort } from './lib/proc.mjs'
import { ROOT, startPostgres, stopPostgres } from './lib/stores.mjs'

const { values: args } = parseArgs({
  options: { seconds: { type: 'string', default: '60' }, concurrency: { type: 'string', default: '64' } },
})
const seconds = Number(args.seconds)
const concurrency = Number(args.concurrency)
const poolSize = Number(process.env.DB_POOL_SIZE ?? 10)
const SEED = 10_000
const log = (line) => console.log(`[soak ${new Date().toISOString().slice(11, 19)}] ${line}`)

const { openPostgresStorage, createPool } = await import(
  path.join(ROOT, 'dist/src/storage/postgres/postgres-storage.js')
)
let pgDir
let url = process.env.DATABASE_URL
if (!url) {
  pgDir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-soak-'))
  // PostgreSQL runs as the postgres user and must reach its directory inside this one.
  fs.chmodSync(pgDir, 0o755)
  const port = await freePort()
  log(`starting PostgreSQL on 127.0.0.1:${port}`)
  url = startPostgres({ dir: path.join(pgDir, 'pg'), port }).url
}
// Bounded: whatever happens, the run ends (and its PostgreSQL stops) within this.
const watchdog = setTimeout(
  () => finish(3, 'watchdog: the soak ran far past its time'),
  (seconds + 120) * 1000,
)

function finish(code, message) {
  if (message) log(message)
  if (pgDir) {
    stopPostgres(path.join(pgDir, 'pg'))
    fs.rmSync(pgDir, { recursive: true, force: true })
  }
  clearTimeout(watchdog)
  process.exit(code)
}

try {
  const admin = createPool({ url, poolSize: 1, statementTimeoutMs: 60_000 }, false)
  await admin.query('DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public')
  await admin.end()
  const store = await openPostgresStorage({ url, poolSize, statementTimeoutMs: 5000 })
  const seed = createPool({ url, poolSize: 1, statementTimeoutMs: 60_000 }, false)
  await seed.query(`INSERT INTO plants (id, name, tag, created_at)
    SELECT i, 'plant ' || i, 'tag' || (i % 100), now() FROM generate_series(1, ${SEED}) AS i`)
  await seed.end()
  log(`${seconds} s of mixed load, ${concurrency} callers, pool of ${poolSize}`)

  const ops = new Array(seconds).fill(0)
  const rss = []
  let failed = 0
  let nextId = 1_000_000n
  const started = performance.now()
  const second = () => Math.floor((performance.now() - started) / 1000)
  const sampler = setInterval(() => rss.push([second(), process.memoryUsage.rss() / 2 ** 20]), 1000)
  const random = (n) => 1 + Math.floor(Math.random() * n)

  async function caller() {
    while (second() < seconds) {
      const dice = Math.random()
      try {
        if (dice < 0.8) await store.readPlantJson(BigInt(random(SEED)))
        else if (dice < 0.9) await store.listPlantsJson({ limit: 100, after: BigInt(random(SEED)) })
        else {
          const id = nextId++
          await store.createPlant({ id, name: `soak ${id}` })
        }
        const at = second()
        if (at < seconds) ops[at]++
      } catch {
        failed++
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, caller))
  clearInterval(sampler)
  await store.close()

  const per10 = []
  for (let from = 0; from + 10 <= seconds; from += 10)
    per10.push(ops.slice(from, from + 10).reduce((a, b) => a + b, 0) / 10)
  const ratio = per10.at(-1) / per10[0]
  log(`operations/s per 10 s: ${per10.map((x) => Math.round(x)).join(', ')}`)
  log(`last 10 s vs first 10 s: ${ratio.toFixed(2)}x (>= 0.9x required); failed operations: ${failed}`)
  const rssAt = rss.filter(([at]) => at % 5 === 0).map(([at, mb]) => `${at}s ${mb.toFixed(0)}`)
  log(`RSS MiB: ${rssAt.join(', ')}`)
  const early = Math.max(...rss.filter(([at]) => at >= 5 && at < 15).map(([, mb]) => mb))
  const late = Math.max(...rss.filter(([at]) => at >= seconds - 10).map(([, mb]) => mb))
  log(
    `RSS, highest in the last 10 s vs in seconds 5-15: ${late.toFixed(0)} vs ${early.toFixed(0)} MiB (${(late / early).toFixed(2)}x, <= 1.25x required)`,
  )
  finish(ratio >= 0.9 && late <= early * 1.25 && failed === 0 ? 0 : 1)
} catch (error) {
  finish(2, `soak failed: ${error.stack ?? error}`)
}
