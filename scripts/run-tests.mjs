#!/usr/bin/env node
// Runs the compiled test files with node:test, several at a time, then the OpenAPI coverage step.
// It names the files itself because `node --test DIR` finds nothing on Node 22 and later, and
// Node 20 takes no glob; node --test options pass through.
//   node scripts/run-tests.mjs [node --test options...] [-- file or folder under dist/test ...]
// Every file runs in a process of its own, with its own PostgreSQL database (test/helpers.ts).
// With no folder named (the whole suite), the files' recorded responses are checked against the
// served OpenAPI document (scripts/openapi-coverage.mjs). The skipped tests are listed with their
// reasons; PLANT_STORE_REQUIRE_ALL_TESTS=1 (CI) makes any skip fail the run.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const scripts = path.dirname(fileURLToPath(import.meta.url))
const separator = process.argv.indexOf('--')
const options = separator === -1 ? process.argv.slice(2) : process.argv.slice(2, separator)
const roots = separator === -1 ? ['dist/test'] : process.argv.slice(separator + 1)
const wholeSuite = separator === -1
const requireAll = !['', '0', 'false'].includes(
  (process.env.PLANT_STORE_REQUIRE_ALL_TESTS ?? '').toLowerCase(),
)

const files = roots.flatMap((root) =>
  fs.statSync(root).isFile()
    ? [root]
    : fs
        .readdirSync(root, { recursive: true })
        .map((name) => path.join(root, String(name)))
        .filter((file) => file.endsWith('.test.js')),
)
files.sort()
if (files.length === 0) {
  console.error(`run-tests: no *.test.js file under ${roots.join(', ')}: run npm run build first`)
  process.exit(1)
}

// Most files wait on sockets, timers and child processes rather than compute: four at a time keep
// two cores busy (node's own default, one fewer than the cores, would run them one by one here).
const concurrency = options.some((option) => option.startsWith('--test-concurrency'))
  ? []
  : [`--test-concurrency=${Math.max(4, os.availableParallelism() * 2)}`]
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-run-tests-'))
const summaryFile = path.join(work, 'summary.json')
const observed = path.join(work, 'observed')
fs.mkdirSync(observed)
const reporters = options.some((option) => option.startsWith('--test-reporter'))
  ? []
  : [
      '--test-reporter=spec',
      '--test-reporter-destination=stdout',
      `--test-reporter=${path.join(scripts, 'test-summary-reporter.mjs')}`,
      `--test-reporter-destination=${summaryFile}`,
    ]

const started = performance.now()
const run = spawnSync(process.execPath, ['--test', ...concurrency, ...reporters, ...options, ...files], {
  stdio: 'inherit',
  env: { ...process.env, PLANT_STORE_OBSERVED_DIR: observed },
})
const seconds = (performance.now() - started) / 1000
let status = run.status ?? 1

if (fs.existsSync(summaryFile)) {
  const { skipped, fileMs } = JSON.parse(fs.readFileSync(summaryFile, 'utf8'))
  const sum = Object.values(fileMs).reduce((total, ms) => total + ms, 0) / 1000
  console.log(
    `\nrun-tests: ${files.length} files in ${seconds.toFixed(1)} s (${concurrency[0] ?? 'concurrency as given'}); ` +
      `the files' own test time adds up to ${sum.toFixed(1)} s`,
  )
  const slowest = Object.entries(fileMs)
    .sort(([, a], [, b]) => b - a)
    .slice(0, 5)
  console.log(
    `run-tests: slowest: ${slowest.map(([file, ms]) => `${path.basename(file)} ${(ms / 1000).toFixed(1)} s`).join(', ')}`,
  )
  console.log(`run-tests: ${skipped.length} skipped`)
  for (const { file, name, reason } of skipped)
    console.log(`  ${path.relative(process.cwd(), file ?? '?')}: ${name}${reason ? `: ${reason}` : ''}`)
  if (requireAll && skipped.length > 0) {
    console.error('run-tests: PLANT_STORE_REQUIRE_ALL_TESTS is set, so a skipped test fails the run')
    status = status || 1
  }
}
if (!process.env.TEST_DATABASE_URL) console.log('run-tests: TEST_DATABASE_URL is unset: SQLite only')

if (wholeSuite) {
  const coverage = spawnSync(process.execPath, [path.join(scripts, 'openapi-coverage.mjs'), observed], {
    stdio: 'inherit',
  })
  status = status || (coverage.status ?? 1)
}
fs.rmSync(work, { recursive: true, force: true })
process.exit(status)
