/**
 * The writer's side of taking back a commit whose WAL sync failed (`commit-discarder.ts`): it
 * waits for locks on timers, not on the event loop, and tells why when it cannot discard. What
 * the native function does to the files is in sqlite-wal-coalescing.test.ts.
 */
import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterEach, beforeEach, describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { CommitDiscarder, type DiscardOutcome } from '../../src/storage/sqlite/commit-discarder.js'
import { loadWalCoalescing } from '../../src/storage/sqlite/wal-coalescing.js'

let dir: string
let file: string
const open: Database.Database[] = []

function connect(): Database.Database {
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = OFF')
  db.exec('CREATE TABLE IF NOT EXISTS plants (id INTEGER PRIMARY KEY, name TEXT NOT NULL)')
  open.push(db)
  return db
}

const insert = (db: Database.Database, id: number) =>
  db.prepare('INSERT INTO plants (id, name) VALUES (?, ?)').run(id, `plant ${id}`)
const ids = (db: Database.Database) => db.prepare('SELECT id FROM plants ORDER BY id').pluck().all()
const discard = (discarder: CommitDiscarder) =>
  new Promise<DiscardOutcome>((resolve) => discarder.discardLast(resolve))

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-discarder-'))
  file = path.join(dir, 'plants.db')
  assert.deepEqual(loadWalCoalescing(true), { state: 'on' })
})

afterEach(() => {
  for (const db of open.splice(0)) db.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

describe('CommitDiscarder', () => {
  it('waits on timers while another connection holds the write lock, then discards', async () => {
    const writer = connect()
    // As the service's writer: SQLite's busy handler would sleep on the event loop.
    writer.pragma('busy_timeout = 0')
    const discarder = new CommitDiscarder(writer, `${file}-wal`, true)
    insert(writer, 1)
    insert(writer, 2)
    const other = connect()
    other.exec('BEGIN IMMEDIATE')
    let ticks = 0
    const ticker = setInterval(() => ticks++, 5)
    setTimeout(() => other.exec('ROLLBACK'), 100)
    try {
      assert.deepEqual(await discard(discarder), { discarded: true })
    } finally {
      clearInterval(ticker)
    }
    assert.ok(ticks >= 5, `the event loop ran only ${ticks} timers while the discard waited`)
    assert.deepEqual(ids(connect()), [1])
  })

  it('says so when another connection committed after the commit', async () => {
    const writer = connect()
    const discarder = new CommitDiscarder(writer, `${file}-wal`, true)
    insert(writer, 1)
    insert(connect(), 2)
    assert.deepEqual(await discard(discarder), {
      discarded: false,
      why: 'another connection committed after it',
    })
    assert.deepEqual(ids(connect()), [1, 2])
  })

  it('says so when a checkpoint has copied the commit already', async () => {
    const writer = connect()
    const discarder = new CommitDiscarder(writer, `${file}-wal`, true)
    insert(writer, 1)
    connect().pragma('wal_checkpoint(PASSIVE)')
    const outcome = await discard(discarder)
    assert.deepEqual(outcome, {
      discarded: false,
      why: 'a checkpoint had already copied it into the database file',
    })
    assert.deepEqual(ids(connect()), [1])
  })

  it('says so when the cut could not be synced, which a power cut may undo but no restart', async () => {
    const writer = connect()
    const discarder = new CommitDiscarder(writer, path.join(dir, 'no-such-wal'), true)
    insert(writer, 1)
    insert(writer, 2)
    const outcome = await discard(discarder)
    assert.ok(outcome.discarded && 'unsynced' in outcome, JSON.stringify(outcome))
    assert.match(outcome.unsynced, /ENOENT/)
    assert.deepEqual(ids(connect()), [1])
  })

  it('says so without the library, and changes nothing', async () => {
    const writer = connect()
    const discarder = new CommitDiscarder(writer, `${file}-wal`, false)
    insert(writer, 1)
    assert.deepEqual(await discard(discarder), {
      discarded: false,
      why: 'the wal-coalesce library, which discards it, is not loaded',
    })
    assert.deepEqual(ids(connect()), [1])
  })
})
