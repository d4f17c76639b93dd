#!/usr/bin/env node
// What one create costs SQLite itself, outside the service: transactions of 30 inserts (a batch at
// 64 connections) into the service's plants table, with sequential or random ids, from an
// in-memory B-tree up to the WAL file, its fsync and its checkpoints, as the service's writer
// does them (synchronous OFF, the WAL synced by hand after each COMMIT, a RESTART checkpoint
// every 100 commits). It reports CPU time per insert, user and system: on the benchmark's one
// server core the kernel's share of a write and an fsync is time the service cannot serve in.
//
//   node bench/sqlite-insert-cost.mjs [--transactions N]     (after npm install; about 30 s)
//
// Every file is made in a temporary folder and removed at the end; it stops by itself.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { randomBytes } from 'node:crypto'
import Database from 'better-sqlite3'
import { ROOT } from './lib/stores.mjs'

const flag = process.argv.indexOf('--transactions')
const TRANSACTIONS = flag > 0 ? Number(process.argv[flag + 1]) : 3000
const BATCH = 30
const CHECKPOINT_EVERY = 100
const library = path.join(ROOT, 'build', 'wal-coalesce.so')
const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-insert-cost-'))

/** The stages, each adding one cost to the one before. */
const STAGES = [
  { name: 'B-tree in memory', file: false },
  { name: '+ WAL file (SQLite writes)', file: true },
  { name: '+ WAL writes coalesced', file: true, vfs: true },
  { name: '+ checkpoints', file: true, vfs: true, checkpoint: true },
  { name: '+ fdatasync per commit', file: true, vfs: true, checkpoint: true, sync: true },
]

let vfsLoaded = false
function run(stage, ids, index) {
  if (stage.vfs && !vfsLoaded) {
    if (!fs.existsSync(library)) return undefined
    // Loading it once makes it the process's default VFS, for the file stages after this one.
    const loader = new Database(':memory:')
    loader.loadExtension(library)
    loader.close()
    vfsLoaded = true
  }
  const file = path.join(folder, `${STAGES.indexOf(stage)}-${ids}-${index}.db`)
  const db = new Database(stage.file ? file : ':memory:')
  db.pragma(`journal_mode = ${stage.file ? 'WAL' : 'MEMORY'}`)
  db.pragma('synchronous = OFF')
  db.pragma('wal_autocheckpoint = 0')
  db.pragma('cache_size = -8192')
  db.exec(
    'CREATE TABLE plants (id INTEGER PRIMARY KEY, name TEXT NOT NULL, tag TEXT, created_at INTEGER NOT NULL)',
  )
  if (index) db.exec('CREATE INDEX plants_tag_id ON plants (tag, id)')
  const insert = db
    .prepare('INSERT INTO plants (id, name, tag, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING')
    .safeIntegers(true)
  const begin = db.prepare('BEGIN IMMEDIATE')
  const commit = db.prepare('COMMIT')
  const walFd = stage.sync ? fs.openSync(`${file}-wal`, 'r+') : undefined
  // The ids and tags are made before the clock starts, as the service gets them from requests.
  let next = 1n
  const rows = Array.from({ length: TRANSACTIONS * BATCH }, () => {
    const id = ids === 'sequential' ? next++ : randomBytes(8).readBigInt64BE() & 0x7fff_ffff_ffff_ffffn
    return [id, ids === 'sequential' ? 'bench' : `tag${id % 100n}`]
  })
  const cpu = process.cpuUsage()
  const started = process.hrtime.bigint()
  for (let t = 0; t < TRANSACTIONS; t++) {
    begin.run()
    for (let i = t * BATCH; i < (t + 1) * BATCH; i++) {
      const [id, tag] = rows[i]
      insert.run(id, 'bench plant', tag, BigInt(Date.now()))
    }
    commit.run()
    if (walFd !== undefined) fs.fdatasyncSync(walFd)
    if (stage.checkpoint && t % CHECKPOINT_EVERY === CHECKPOINT_EVERY - 1)
      db.pragma('wal_checkpoint(RESTART)')
  }
  const wall = Number(process.hrtime.bigint() - started) / 1000
  const used = process.cpuUsage(cpu)
  if (walFd !== undefined) fs.closeSync(walFd)
  db.close()
  const inserts = TRANSACTIONS * BATCH
  return { user: used.user / inserts, system: used.system / inserts, wall: wall / inserts }
}

try {
  console.log(`${TRANSACTIONS} transactions of ${BATCH} inserts each, µs per insert (CPU: user + system)\n`)
  console.log(
    '| stage | index | sequential ids: CPU (user + sys) | random ids: CPU (user + sys) | random / sequential |',
  )
  console.log('|---|---|--:|--:|--:|')
  for (const stage of STAGES) {
    for (const index of [true, false]) {
      const seq = run(stage, 'sequential', index)
      const rand = run(stage, 'random', index)
      if (!seq || !rand) {
        console.log(
          `| ${stage.name} | ${index ? '(tag, id)' : 'none'} | not run: ${library} is missing | | |`,
        )
        continue
      }
      const cell = (r) => `${(r.user + r.system).toFixed(2)} (${r.user.toFixed(2)} + ${r.system.toFixed(2)})`
      const ratio = (rand.user + rand.system) / (seq.user + seq.system)
      console.log(
        `| ${stage.name} | ${index ? '(tag, id)' : 'none'} | ${cell(seq)} | ${cell(rand)} | ${ratio.toFixed(1)}x |`,
      )
    }
  }
} finally {
  fs.rmSync(folder, { recursive: true, force: true })
}
