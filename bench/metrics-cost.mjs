#!/usr/bin/env node
// What a scrape of /metrics costs (docs/observability.md#what-a-scrape-costs):
//   node bench/metrics-cost.mjs [--dist DIR] [--pending N] [--flood N]
// 1. Scrape time with N pending webhook deliveries (default 500,000), inserted with SQL into a
//    migrated SQLite store before the service starts: three scrapes each after the gauges' cache
//    has expired (the store is read), then ten in a row (served from the cache).
// 2. Series and scrape size after a flood of anonymous odd requests (default 6,000): random
//    methods Node accepts, random paths, no Host, Transfer-Encoding: gzip.
// It scrapes METRICS_PORT on 127.0.0.1, which needs no token; --dist runs another build.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import { freePort } from './lib/proc.mjs'

const { values } = parseArgs({
  options: {
    dist: { type: 'string', default: 'dist' },
    pending: { type: 'string', default: '500000' },
    flood: { type: 'string', default: '6000' },
  },
})
const main = path.resolve(values.dist, 'bundle/main.js')
const pending = Number(values.pending)
const flood = Number(values.flood)
const CACHE_WAIT_MS = 5_500
const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]
const round = (ms) => Math.round(ms * 10) / 10

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'metrics-cost-'))
const env = { ...process.env, PLANT_STORE_DB: path.join(dir, 'plants.db'), LOG_LEVEL: 'warn' }
const migrated = spawnSync(process.execPath, [main, 'migrate'], { env, encoding: 'utf8' })
if (migrated.status !== 0) throw new Error(`migrate failed: ${migrated.stderr}`)

const db = new Database(env.PLANT_STORE_DB)
db.exec(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${pending})
  INSERT INTO webhook_deliveries (id, subscription_id, plant_id, payload, status, next_attempt_at, created_at)
  SELECT 'd' || i, 'sub', i, '{}', 'pending', 4102444800000, 1700000000000 + i FROM s`)
// The store's share of a scrape, in this process: the two statements, each on its own.
const statements = {
  'count and min in one aggregate (before)':
    "SELECT count(*) AS n, min(created_at) AS oldest FROM webhook_deliveries WHERE status = 'pending'",
  'count, and min as a subquery, on the pending-by-age index (after)': `SELECT count(*) AS n,
    (SELECT min(created_at) FROM webhook_deliveries INDEXED BY webhook_deliveries_pending_age WHERE status = 'pending') AS oldest
    FROM webhook_deliveries INDEXED BY webhook_deliveries_pending_age WHERE status = 'pending'`,
}
const hasIndex = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'webhook_deliveries_pending_age'").get()
for (const [what, sql] of Object.entries(statements)) {
  if (sql.includes('INDEXED BY') && !hasIndex) continue
  const statement = db.prepare(sql)
  const runs = []
  for (let i = 0; i < 7; i++) {
    const started = process.hrtime.bigint()
    statement.get()
    runs.push(Number(process.hrtime.bigint() - started) / 1e6)
  }
  console.log(`${what}: median ${round(median(runs))} ms of 7`)
}
db.close()

const [port, metricsPort] = [await freePort(), await freePort()]
const child = spawn(process.execPath, [main, 'serve'], {
  env: { ...env, PORT: String(port), METRICS_PORT: String(metricsPort), WEBHOOK_WORKER: 'false' },
  stdio: ['ignore', 'ignore', 'inherit'],
})
const stop = () => child.kill('SIGTERM')
process.on('exit', stop)

const get = (url) =>
  new Promise((resolve, reject) => {
    const started = process.hrtime.bigint()
    http
      .get(url, (response) => {
        const chunks = []
        response.on('data', (chunk) => chunks.push(chunk))
        response.on('end', () =>
          resolve({
            status: response.statusCode,
            body: Buffer.concat(chunks).toString(),
            ms: Number(process.hrtime.bigint() - started) / 1e6,
          }),
        )
      })
      .on('error', reject)
  })

const scrapeUrl = `http://127.0.0.1:${metricsPort}/metrics`
for (let i = 0; ; i++) {
  const up = await get(scrapeUrl).catch(() => undefined)
  if (up?.status === 200) break
  if (i > 300) throw new Error('the service did not start')
  await sleep(100)
}

const cold = []
for (let i = 0; i < 3; i++) {
  await sleep(CACHE_WAIT_MS)
  cold.push((await get(scrapeUrl)).ms)
}
const warm = []
for (let i = 0; i < 10; i++) warm.push((await get(scrapeUrl)).ms)
const gauge = /plant_store_webhook_deliveries_pending (\d+)/.exec((await get(scrapeUrl)).body)?.[1]
console.log(`pending deliveries: ${pending} (gauge says ${gauge})`)
console.log(`scrape after the cache expired: ${cold.map(round).join(', ')} ms`)
console.log(`ten scrapes in a row: median ${round(median(warm))} ms, max ${round(Math.max(...warm))} ms`)

const series = (text) => text.split('\n').filter((line) => line !== '' && !line.startsWith('#'))
const family = (lines, name) => lines.filter((line) => line.startsWith(name)).length
const report = (what, body) => {
  const lines = series(body)
  console.log(
    `${what}: ${lines.length} series (${family(lines, 'plant_store_http_requests_total')} of http_requests_total, ` +
      `${family(lines, 'plant_store_http_request_duration_seconds')} of the duration histogram), ${body.length} bytes`,
  )
}
report('before the flood', (await get(scrapeUrl)).body)

const METHODS = http.METHODS.filter((method) => method !== 'CONNECT')
const pick = (list) => list[Math.floor(Math.random() * list.length)]
const PATHS = ['/plants', '/plants/1', '/healthz', '/readyz', '/openapi.json', '/metrics', '/x', '/a/b', '/']
const oddRequest = () => {
  const method = pick(METHODS)
  const target = Math.random() < 0.5 ? pick(PATHS) : `/${Math.random().toString(36).slice(2)}`
  const headers = [Math.random() < 0.8 ? `Host: 127.0.0.1:${port}` : '']
  if (Math.random() < 0.2) headers.push('Transfer-Encoding: gzip')
  if (Math.random() < 0.1) headers.push('Expect: nonsense')
  headers.push('Content-Length: 0', 'Connection: close')
  return `${method} ${target} HTTP/1.1\r\n${headers.filter(Boolean).join('\r\n')}\r\n\r\n`
}
const once = () =>
  new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(oddRequest()))
    socket.setTimeout(5_000, () => socket.destroy())
    socket.on('data', () => {})
    socket.on('error', () => resolve())
    socket.on('close', () => resolve())
  })
const deadline = Date.now() + 120_000
let sent = 0
await Promise.all(
  Array.from({ length: 16 }, async () => {
    while (sent < flood && Date.now() < deadline) {
      sent++
      await once()
    }
  }),
)
const flooded = await get(scrapeUrl)
report(`after ${sent} odd requests`, flooded.body)
const times = []
for (let i = 0; i < 5; i++) times.push((await get(scrapeUrl)).ms)
console.log(`scrape after the flood: median ${round(median(times))} ms`)
stop()
fs.rmSync(dir, { recursive: true, force: true })
