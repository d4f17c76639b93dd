#!/usr/bin/env node
// The PostgreSQL adapter alone, with no HTTP: CONCURRENCY (default 64) callers run one operation
// (creates with sequential or random ids, reads by id, pages of 100 from random cursors) through
// openPostgresStorage for SECONDS (default 3) each, after 1 s of warm-up, and it reports operations
// per second and the CPU per operation of this process and of PostgreSQL (its postmaster's
// processes, read from /proc). It shows what the adapter costs apart from the HTTP stack.
// Starts its own PostgreSQL (scripts/pg-test-server.sh) and stops by itself.
// Usage: npm run build && node bench/pg-adapter.mjs [--seconds 3] [--concurrency 64]
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { freePort, treeCpuSeconds } from './lib/proc.mjs'
import { ROOT, startPostgres, stopPostgres } from './lib/stores.mjs'

const { values: args } = parseArgs({
  options: { seconds: { type: 'string', default: '3' }, concurrency: { type: 'string', default: '64' } },
})
const seconds = Number(args.seconds)
const concurrency = Number(args.concurrency)
const SEED = 10_000

const { openPostgresStorage, createPool } = await import(
  path.join(ROOT, 'dist/src/storage/postgres/postgres-storage.js')
)
const pgDir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-adapter-'))
// PostgreSQL runs as the postgres user and must reach its directory inside this one.
fs.chmodSync(pgDir, 0o755)
const { url, postmasterPid: postmaster } = startPostgres({
  dir: path.join(pgDir, 'pg'),
  port: await freePort(),
})
const watchdog = setTimeout(() => finish(3), (5 * (seconds + 1) + 120) * 1000)

function finish(code) {
  stopPostgres(path.join(pgDir, 'pg'))
  fs.rmSync(pgDir, { recursive: true, force: true })
  clearTimeout(watchdog)
  process.exit(code)
}

try {
  const store = await openPostgresStorage({ url, poolSize: 10, statementTimeoutMs: 5000 })
  const seed = createPool({ url, poolSize: 1, statementTimeoutMs: 60_000 }, false)
  await seed.query(`INSERT INTO plants (id, name, tag, created_at)
    SELECT i, 'plant ' || i, 'tag' || (i % 100), now() FROM generate_series(1, ${SEED}) AS i`)
  await seed.end()
  const random = (n) => 1 + Math.floor(Math.random() * n)
  let nextId = 1_000_000n
  const create = (id) => store.createPlant({ id, name: `plant ${id}` })
  const operations = {
    'create-seq': () => create(nextId++),
    'create-rand': () => create((BigInt(random(2 ** 31)) << 31n) + BigInt(random(2 ** 31))),
    'get-id': () => store.readPlantJson(BigInt(random(SEED))),
    'list-after': () => store.listPlantsJson({ limit: 100, after: BigInt(random(SEED - 100)) }),
  }
  console.log(`${concurrency} callers, ${seconds} s each, pool of 10, on ${os.cpus().length} CPUs`)
  for (const [name, operation] of Object.entries(operations)) {
    const run = async (ms) => {
      let count = 0
      const until = performance.now() + ms
      const caller = async () => {
        while (performance.now() < until) {
          await operation()
          count++
        }
      }
      await Promise.all(Array.from({ length: concurrency }, caller))
      return count
    }
    await run(1000)
    const cpu = process.cpuUsage()
    const pg = treeCpuSeconds(postmaster)
    const started = performance.now()
    const count = await run(seconds * 1000)
    const elapsed = (performance.now() - started) / 1000
    const used = process.cpuUsage(cpu)
    const perOp = (cpuSeconds) => ((cpuSeconds * 1e6) / count).toFixed(1)
    console.log(
      `${name.padEnd(11)} ${String(Math.round(count / elapsed)).padStart(7)} ops/s  ` +
        `this process ${perOp((used.user + used.system) / 1e6)} µs/op  PostgreSQL ${perOp(treeCpuSeconds(postmaster) - pg)} µs/op`,
    )
  }
  await store.close()
  finish(0)
} catch (error) {
  console.error(`pg-adapter failed: ${error.stack ?? error}`)
  finish(2)
}
