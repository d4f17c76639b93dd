#!/usr/bin/env node
// The 1M-plant check of backup, export and import (docs/backups.md): import 1M plants, export
// them, back the store up while a live `serve` takes writes, check the copy (PRAGMA
// integrity_check, every plant acknowledged before the backup began), then import the export into
// a fresh store and export again: the two files must be identical. Prints time and size figures.
// Usage: npm run build && node scripts/data-moves-1m.mjs [PLANTS]   (default 1,000,000)
import { execFile, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'

const root = fileURLToPath(new URL('..', import.meta.url))
const cli = path.join(root, 'dist/bundle/main.js')
const plants = Number(process.argv[2] ?? 1_000_000)
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-1m-'))
const rows = []
const mb = (bytes) => `${(bytes / 1e6).toFixed(1)} MB`

function run(args, env, label) {
  const started = Date.now()
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [cli, ...args], { env: { ...process.env, ...env }, maxBuffer: 1 << 26 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`${args.join(' ')} failed: ${stderr}`))
      const ms = Date.now() - started
      if (label) rows.push([label, `${(ms / 1000).toFixed(1)} s`])
      resolve({ stdout, stderr, ms })
    })
  })
}

const sha256 = (file) => createHash('sha256').update(fs.readFileSync(file)).digest('hex')

try {
  const source = path.join(dir, 'source.ndjson')
  const out = fs.createWriteStream(source)
  for (let i = 0; i < plants; i++) {
    // Ids spread over int64, past 2^53 on both sides; a tag on two plants in three.
    const id = (BigInt(i) - BigInt(plants / 2)) * 9_007_199_254_741n + 13n
    const tag = i % 3 === 0 ? '' : `,"tag":"tag${i % 50}"`
    if (!out.write(`{"id":${id},"name":"plant ${i}"${tag}}\n`)) await new Promise((r) => out.once('drain', r))
  }
  await new Promise((r) => out.end(r))
  rows.push(['NDJSON input', mb(fs.statSync(source).size)])

  const storeA = { PLANT_STORE_DB: path.join(dir, 'a.db') }
  await run(['import', source], storeA, `import ${plants.toLocaleString('en-US')} plants (new store)`)
  rows.push(['store size after import', mb(fs.statSync(storeA.PLANT_STORE_DB).size)])
  const first = path.join(dir, 'first.ndjson')
  await run(['export', first], storeA, 'export')
  rows.push(['export size', mb(fs.statSync(first).size)])

  // A live service on the same file, taking creates from four writers.
  const token = (await run(['tokens', 'create', '--name', 'bench'], storeA)).stdout.trim()
  const service = spawn(process.execPath, [cli, 'serve'], {
    env: { ...process.env, ...storeA, PORT: '0', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const url = await new Promise((resolve, reject) => {
    let text = ''
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${text}`)), 30_000)
    service.stdout.on('data', (chunk) => {
      text += chunk
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(text)
      if (match) {
        clearTimeout(timer)
        resolve(match[1])
      }
    })
  })
  const acknowledged = new Set()
  let next = 10n ** 18n
  let writing = true
  const writer = async () => {
    while (writing) {
      const id = next++
      const answer = await fetch(`${url}/plants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: `{"id":${id},"name":"live"}`,
      })
      await answer.text()
      if (answer.status !== 200) throw new Error(`create answered ${answer.status}`)
      acknowledged.add(id)
    }
  }
  const writers = Array.from({ length: 4 }, writer)
  while (acknowledged.size < 500) await new Promise((r) => setTimeout(r, 10))
  const before = new Set(acknowledged)
  const copy = path.join(dir, 'backup.db')
  await run(['backup', copy], storeA, 'backup while serve takes writes')
  const during = acknowledged.size - before.size
  writing = false
  await Promise.all(writers)
  service.kill('SIGTERM')
  await new Promise((r) => service.once('exit', r))
  rows.push(['backup size', mb(fs.statSync(copy).size)])
  rows.push(['creates acknowledged during the backup', String(during)])

  const db = new Database(copy, { readonly: true })
  let started = Date.now()
  const integrity = db.pragma('integrity_check', { simple: true })
  rows.push(['PRAGMA integrity_check on the backup', `${integrity} (${((Date.now() - started) / 1000).toFixed(1)} s)`])
  const has = db.prepare('SELECT 1 FROM plants WHERE id = ?').pluck()
  const missing = [...before].filter((id) => has.get(id) === undefined)
  const count = db.prepare('SELECT count(*) FROM plants').pluck().get()
  db.close()
  rows.push(['plants in the backup', `${count} (${plants} imported + ${before.size} acknowledged before it began, ${count - plants - before.size} more)`])
  rows.push(['acknowledged before the backup and missing from it', String(missing.length)])

  const storeB = { PLANT_STORE_DB: path.join(dir, 'b.db') }
  await run(['import', first], storeB, 'import the export into a fresh store')
  const second = path.join(dir, 'second.ndjson')
  await run(['export', second], storeB)
  const identical = sha256(first) === sha256(second)
  rows.push(['round trip: export, import, export again', identical ? 'identical files' : 'FILES DIFFER'])
  started = Date.now()
  const again = await run(['import', first], storeB)
  rows.push(['import again (all already present)', `${(again.ms / 1000).toFixed(1)} s: ${again.stderr.trim().split('\n').at(-1)}`])

  const width = Math.max(...rows.map(([label]) => label.length))
  for (const [label, value] of rows) console.log(`${label.padEnd(width)}  ${value}`)
  if (integrity !== 'ok' || missing.length > 0 || !identical) process.exitCode = 1
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
