/**
 * Power loss, simulated: the real service (SQLite, defaults) runs under write load with an
 * LD_PRELOAD shim that records every write and sync it makes on the store's files
 * (io-recorder.c); it is then killed, and the files are rebuilt as a power cut at many points of
 * that run could have left them (io-log.ts): around every WAL restart and checkpoint, and while
 * commits' syncs were under way. Each state must open with `PRAGMA integrity_check` ok, hold every
 * create answered 200 and none of the plants whose delete was answered 204 before that point.
 *
 * POWER_LOSS_DIST runs it against another build's dist folder (its bundle and CLI);
 * POWER_LOSS_STATES bounds the states checked (default 1500).
 */
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { projectRoot } from '../helpers.js'
import { request } from '../http-client.js'
import { compileShim } from '../shim.js'
import { CrashStates, type IoEvent, readIoLog, type Unit } from './io-log.js'

const dist = path.resolve(process.env.POWER_LOSS_DIST ?? path.join(projectRoot, 'dist'))
const cli = path.join(dist, 'bundle/main.js')
const MAX_STATES = Number(process.env.POWER_LOSS_STATES ?? 1500)
const CREATES = 4000
const CLIENTS = 16

/** A small seeded generator, so that a failing run can be replayed. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

interface Acks {
  /** Plant id -> when its 200 arrived (CLOCK_MONOTONIC ns, the recorder's clock). */
  created: Map<string, bigint>
  /** Plant id -> when its 204 arrived. */
  deleted: Map<string, bigint>
  /** Plants a delete was sent for: whether they are there depends on when the power went. */
  deleting: Set<string>
}

/** CLIENTS loops of creates with random ids, every fifth request a delete of one created before. */
async function writeLoad(url: string, token: string): Promise<Acks> {
  const acks: Acks = { created: new Map(), deleted: new Map(), deleting: new Set() }
  const next = random(26)
  let sent = 0
  const client = async () => {
    const mine: string[] = []
    for (let i = 0; sent < CREATES; i++) {
      if (i % 5 === 4 && mine.length > 0) {
        const id = mine.splice(Math.floor(next() * mine.length), 1)[0] as string
        acks.deleting.add(id)
        const response = await request('DELETE', `${url}/plants/${id}`, { token })
        assert.equal(response.status, 204)
        acks.deleted.set(id, process.hrtime.bigint())
        continue
      }
      sent++
      const id = String(BigInt(Math.floor(next() * 2 ** 52)) * 1024n + BigInt(sent % 1024))
      const body = `{"id":${id},"name":"plant ${id}","tag":"t${sent % 97}"}`
      const response = await request('POST', `${url}/plants`, { token, body })
      assert.equal(response.status, 200)
      acks.created.set(id, process.hrtime.bigint())
      mine.push(id)
    }
  }
  await Promise.all(Array.from({ length: CLIENTS }, client))
  return acks
}

/** Starts the service under the recorder, loads it, kills it with SIGKILL; returns the acks. */
async function recordRun(dir: string, log: string, token: string): Promise<Acks> {
  const child = spawn(process.execPath, [cli, 'serve'], {
    cwd: path.dirname(dist),
    env: {
      ...process.env,
      PLANT_STORE_DB: path.join(dir, 'plants.db'),
      PORT: '0',
      LOG_LEVEL: 'info',
      LD_PRELOAD: compileShim('test/power-loss/io-recorder.c'),
      IO_RECORDER_DIR: `${dir}/`,
      IO_RECORDER_LOG: log,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let output = ''
      let listening = false
      const seen = (chunk: Buffer) => {
        output += chunk.toString()
        // Searched until found only: each search flattens the output, which grows by every request's log line.
        if (listening) return
        const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)
        if (match?.[1]) {
          listening = true
          resolve(match[1])
        }
      }
      child.stdout.on('data', seen)
      child.stderr.on('data', seen)
      void exited.then(() => reject(new Error(`the service exited:\n${output}`)))
    })
    return await writeLoad(url, token)
  } finally {
    child.kill('SIGKILL')
    await exited
  }
}

/**
 * Crash points (how many events happened) and how many random subsets each gets: every point
 * around a WAL restart (where the old hand-made sync corrupted stores) gets more, then points
 * around checkpoints, then commits' syncs under way, sampled to stay within MAX_STATES.
 */
function crashPoints(events: IoEvent[], isWal: (file: number) => boolean, isDb: (file: number) => boolean) {
  const points = new Map<number, number>()
  const commits: number[] = []
  const add = (k: number, randomSubsets: number) => {
    if (k <= events.length) points.set(k, Math.max(points.get(k) ?? 0, randomSubsets))
  }
  const dbWrite = (e: IoEvent | undefined) => e?.type === 'write' && isDb(e.file)
  for (const [i, event] of events.entries()) {
    if (event.type === 'write' && isWal(event.file) && event.offset === 0) {
      for (let k = i; k <= i + 8; k++) add(k, 8)
    }
    if (dbWrite(event) && !dbWrite(events[i - 1])) [i, i + 1].forEach((k) => add(k, 2))
    if (event.type === 'sync-start' && isDb(event.file)) [i, i + 1, i + 2].forEach((k) => add(k, 2))
    // The sync of a commit under way: its frames may be anywhere between none and all.
    if (event.type === 'sync-end' && isWal(event.file)) commits.push(i)
  }
  const statesOf = (randomSubsets: number) => 4 + randomSubsets
  let budget = MAX_STATES - [...points.values()].reduce((sum, n) => sum + statesOf(n), 0)
  const step = Math.max(1, commits.length / Math.max(1, budget / statesOf(2)))
  for (let j = 0; j < commits.length && budget > 0; j += step, budget -= statesOf(2)) {
    add(commits[Math.floor(j)] as number, 2)
  }
  return [...points].sort(([a], [b]) => a - b)
}

/** Which pending units a state keeps: none, all, the first alone, all but the first, random halves. */
function subsets(pending: Unit[], randomSubsets: number, next: () => number): Unit[][] {
  const chosen = [[], pending]
  if (pending.length > 1) chosen.push(pending.slice(0, 1), pending.slice(1))
  if (pending.length > 2)
    for (let r = 0; r < randomSubsets; r++) chosen.push(pending.filter(() => next() < 0.5))
  return chosen
}

describe('power loss (sqlite, SQLITE_SYNC=full)', () => {
  it('leaves every crash state intact, with every acknowledged create and delete', async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-power-'))
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-power-work-'))
    t.after(() => {
      fs.rmSync(dir, { recursive: true, force: true })
      fs.rmSync(work, { recursive: true, force: true })
    })
    const db = path.join(dir, 'plants.db')
    const token = execFileSync(process.execPath, [cli, 'tokens', 'create', '--name', 'power'], {
      cwd: path.dirname(dist),
      env: { ...process.env, PLANT_STORE_DB: db },
    })
      .toString()
      .trim()
    const initial = new Map([[db, fs.readFileSync(db)]])
    assert.equal(fs.existsSync(`${db}-wal`), false, 'the CLI closed the store cleanly')
    const log = path.join(work, 'io.log')
    const acks = await recordRun(dir, log, token)

    const events = readIoLog(log)
    const opened = new Map<number, string>()
    for (const event of events) if (event.type === 'open') opened.set(event.file, event.path)
    assert.deepEqual(
      events.filter((e) => e.type === 'unlink' || e.type === 'rename'),
      [],
      'no store file was removed or renamed: the model covers writes, truncates and syncs',
    )
    const isWal = (file: number) => opened.get(file) === `${db}-wal`
    const isDb = (file: number) => opened.get(file) === db
    const restarts = events.filter((e) => e.type === 'write' && isWal(e.file) && e.offset === 0).length
    const checkpoints = events.filter((e) => e.type === 'sync-start' && isDb(e.file)).length
    assert.ok(restarts >= 3, `only ${restarts} WAL headers written: the load did not restart the WAL`)

    const states = new CrashStates(events, initial)
    const next = random(1)
    const stateDir = path.join(work, 'state')
    let built = 0
    const corrupt: string[] = []
    const lost: string[] = []
    for (const [k, randomSubsets] of crashPoints(events, isWal, isDb)) {
      const { durable, pending } = states.at(k)
      const crashedAt = k === 0 ? 0n : (events[k - 1] as IoEvent).ns
      for (const kept of subsets(pending, randomSubsets, next)) {
        built++
        states.write(stateDir, durable, kept)
        const found = check(path.join(stateDir, 'plants.db'))
        const where = `crash point ${k} of ${events.length}, ${kept.length} of ${pending.length} pending pages kept`
        if (typeof found === 'string') {
          corrupt.push(`${where}: ${found}`)
          continue
        }
        for (const [id, at] of acks.created) {
          if (at < crashedAt && !acks.deleting.has(id) && !found.has(id))
            lost.push(`${where}: plant ${id} created`)
        }
        for (const [id, at] of acks.deleted) {
          if (at < crashedAt && found.has(id)) lost.push(`${where}: plant ${id} deleted, yet there`)
        }
      }
    }
    t.diagnostic(
      `${events.length} I/O events, ${restarts} WAL restarts, ${checkpoints} database syncs; ` +
        `${acks.created.size} creates and ${acks.deleted.size} deletes acknowledged; ` +
        `crash states built ${built}, corrupt ${corrupt.length}, with an acknowledged write lost ${lost.length}`,
    )
    assert.ok(built >= 100, `only ${built} crash states`)
    assert.deepEqual(corrupt.slice(0, 5), [], `${corrupt.length} corrupt states`)
    assert.deepEqual(lost.slice(0, 5), [], `${lost.length} acknowledged writes lost`)
  })
})

/** The plant ids a state holds, or why it does not open as a sound database. */
function check(file: string): Set<string> | string {
  let db: Database.Database | undefined
  try {
    db = new Database(file, { fileMustExist: true })
    // The state is rebuilt from scratch for the next check: the checkpoint at close need not sync it.
    db.pragma('synchronous = OFF')
    const integrity = db.pragma('integrity_check', { simple: true })
    if (integrity !== 'ok') return `integrity_check: ${String(integrity)}`
    const ids = db.prepare('SELECT id FROM plants').pluck().safeIntegers(true).all() as bigint[]
    return new Set(ids.map(String))
  } catch (error) {
    return (error as Error).message
  } finally {
    db?.close()
  }
}
