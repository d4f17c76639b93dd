/**
 * The WAL write-coalescing VFS (native/wal-coalesce.c): it may change how many calls write the
 * WAL, never what another connection reads. Every test commits through it on one connection and
 * reads on another, which has its own file descriptor and so sees only bytes that reached the
 * file: a frame still in the shim's buffer after COMMIT returned would show up as a missing row,
 * a failed integrity check or a corrupt page.
 */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.js'
import { addWalFunctions, loadWalCoalescing } from '../../src/storage/sqlite/wal-coalescing.js'

const here = path.dirname(fileURLToPath(import.meta.url))
const childScript = path.join(here, 'wal-coalescing-crash-child.js')
let dir: string
let file: string
const open: Database.Database[] = []

function connect(setup?: (db: Database.Database) => void): Database.Database {
  const db = new Database(file)
  db.defaultSafeIntegers(true)
  db.pragma('journal_mode = WAL')
  setup?.(db)
  open.push(db)
  return db
}

/** The store's writer settings: SQLite never syncs and never checkpoints on its own. */
function writer(cachePages = 2000): Database.Database {
  return connect((db) => {
    db.pragma('synchronous = OFF')
    db.pragma('wal_autocheckpoint = 0')
    db.pragma(`cache_size = ${cachePages}`)
    db.exec('CREATE TABLE IF NOT EXISTS plants (id INTEGER PRIMARY KEY, name TEXT NOT NULL, tag TEXT)')
    db.exec('CREATE INDEX IF NOT EXISTS plants_tag_id ON plants (tag, id)')
  })
}

const randomId = () => randomBytes(8).readBigInt64BE() & 0x7fff_ffff_ffff_ffffn

/** Inserts `count` plants with random ids in one transaction; returns their ids. */
function commitRandom(db: Database.Database, count: number): bigint[] {
  const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)')
  const ids = Array.from({ length: count }, randomId)
  db.transaction(() => {
    for (const id of ids) insert.run(id, `plant ${id}`, 'green')
  })()
  return ids
}

function assertAllVisible(reader: Database.Database, ids: bigint[], total: bigint): void {
  assert.equal(reader.prepare('SELECT count(*) FROM plants').pluck().get(), total)
  const byId = reader.prepare('SELECT name FROM plants WHERE id = ?').pluck()
  const byTag = reader.prepare("SELECT 1 FROM plants WHERE tag = 'green' AND id = ?").pluck()
  for (const id of ids) {
    assert.equal(byId.get(id), `plant ${id}`, `plant ${id} by id`)
    assert.equal(byTag.get(id), 1n, `plant ${id} through the tag index`)
  }
}

/**
 * Commits one transaction of each size on `db` and checks after each that `reader` sees it, its
 * plants and the right total; `before` is how many plants were there already.
 */
function commitEachVisible(db: Database.Database, reader: Database.Database, sizes: number[], before = 0n) {
  let total = before
  for (const size of sizes) {
    const ids = commitRandom(db, size)
    total += BigInt(size)
    assertAllVisible(reader, ids, total)
  }
}

/** The file, opened again (which recovers its WAL), holds exactly these plants and is sound. */
function assertExactlyStored(ids: bigint[]): void {
  const db = connect()
  const found = db.prepare('SELECT 1 FROM plants WHERE id = ?').pluck()
  assert.deepEqual(
    ids.filter((id) => found.get(id) === undefined),
    [],
  )
  assert.equal(db.prepare('SELECT count(*) FROM plants').pluck().get(), BigInt(ids.length))
  assert.equal(db.pragma('integrity_check', { simple: true }), 'ok')
}

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-wal-coalesce-'))
  file = path.join(dir, 'plants.db')
  // CI builds the library: a store that silently ran without it would make these tests vacuous.
  assert.deepEqual(loadWalCoalescing(true), { state: 'on' })
})

afterEach(() => {
  for (const db of open.splice(0)) db.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

describe('sqlite WAL write coalescing', () => {
  it('is loaded by the store by default and reported as on, with no warning', () => {
    const store = new SqliteStorage({ path: file, synchronous: 'full' })
    try {
      assert.deepEqual(store.walCoalescing, { state: 'on' })
      assert.deepEqual(store.warnings, [])
    } finally {
      void store.close()
    }
  })

  it('shows every transaction to another connection as soon as COMMIT returns, whatever its size', () => {
    const db = writer()
    const reader = connect()
    // 1 frame pair, around the 124 KiB buffer (31-32 frames of 4 KiB), and far beyond it.
    commitEachVisible(db, reader, [1, 2, 15, 16, 17, 40, 300, 3000, 1])
    assert.equal(reader.pragma('integrity_check', { simple: true }), 'ok')
  })

  it('shows every transaction of 1 to 150 rows, so a commit frame ends the buffer at every offset', () => {
    // The buffer splits a frame's header from its page every 31 frames; a commit frame whose
    // header was written out before its page must still be written out at once.
    const db = writer()
    const reader = connect()
    commitEachVisible(
      db,
      reader,
      Array.from({ length: 150 }, (_, i) => i + 1),
    )
  })

  it('appends to a WAL that another connection began, taking the page size from its header', () => {
    const first = writer()
    const reader = connect()
    const before = [...commitRandom(first, 100), ...commitRandom(first, 7)]
    // The WAL now holds frames: this connection appends to it and never writes its header.
    const second = writer()
    commitEachVisible(second, reader, [1, 33, 250, 2], BigInt(before.length))
    assert.equal(reader.pragma('integrity_check', { simple: true }), 'ok')
  })

  it('keeps reads right across WAL restarts, when frames are written from the start again', () => {
    const db = writer()
    const reader = connect()
    let total = 0n
    for (let round = 0; round < 5; round++) {
      const ids = commitRandom(db, 50 + round * 20)
      total += BigInt(ids.length)
      assertAllVisible(reader, ids, total)
      const [result] = db.pragma('wal_checkpoint(RESTART)') as {
        busy: bigint
        log: bigint
        checkpointed: bigint
      }[]
      assert.deepEqual([result?.busy, result?.log === result?.checkpointed], [0n, true])
    }
    assert.equal(reader.pragma('integrity_check', { simple: true }), 'ok')
  })

  // The checkpointer calls it after every passive checkpoint (checkpoint-thread.ts); the group
  // commit tests count those checkpoints, which a failing call would fail.
  it('gives a connection sync_database_file(), which syncs its file through SQLite', () => {
    const db = writer()
    commitRandom(db, 200)
    // Only a connection that loaded the library has it (the shim itself is process-wide).
    assert.throws(() => db.prepare('SELECT sync_database_file()'), /no such function/)
    assert.equal(addWalFunctions(db, true), true)
    db.pragma('wal_checkpoint(PASSIVE)')
    assert.equal(db.prepare('SELECT sync_database_file()').pluck().get(), null)
    // A database with no file has nothing to sync: the call fails rather than pretend.
    const memory = new Database(':memory:')
    open.push(memory)
    assert.equal(addWalFunctions(memory, true), true)
    assert.throws(() => memory.prepare('SELECT sync_database_file()').get(), /misuse/i)
  })

  describe('discard_last_commit(), for a commit whose WAL sync failed', () => {
    /**
     * The store's files as a crash would leave them (the WAL unchecked-pointed), opened where no
     * connection of this process shares their wal-index: recovery reads the copied WAL alone.
     */
    function afterCrash(): Database.Database {
      const copy = path.join(dir, `crash-${open.length}.db`)
      fs.copyFileSync(file, copy)
      fs.copyFileSync(`${file}-wal`, `${copy}-wal`)
      const db = new Database(copy)
      db.defaultSafeIntegers(true)
      open.push(db)
      return db
    }
    const discard = (db: Database.Database) => db.prepare('SELECT discard_last_commit()').pluck().get()
    const count = (db: Database.Database) => db.prepare('SELECT count(*) FROM plants').pluck().get()

    it('leaves recovery without the last transaction, and with every one before it', () => {
      const db = writer()
      assert.equal(addWalFunctions(db, true), true)
      const kept = [...commitRandom(db, 30), ...commitRandom(db, 1)]
      const lost = commitRandom(db, 30)
      assert.equal(discard(db), 1n)
      const recovered = afterCrash()
      assertAllVisible(recovered, kept, 31n)
      const byId = recovered.prepare('SELECT 1 FROM plants WHERE id = ?').pluck()
      assert.ok(lost.every((id) => byId.get(id) === undefined))
      assert.equal(recovered.pragma('integrity_check', { simple: true }), 'ok')
      assert.equal(discard(db), 0n, 'once only: the transaction before it was synced')
    })

    it('discards a transaction that spilled and rewrote frames, and one that began a new WAL', () => {
      const db = writer(10)
      assert.equal(addWalFunctions(db, true), true)
      commitRandom(db, 50)
      commitRandom(db, 2000)
      assert.equal(discard(db), 1n)
      assert.equal(count(afterCrash()), 50n)

      // Discarded for this process too: a checkpoint now copies only what recovery keeps.
      db.pragma('wal_checkpoint(RESTART)')
      assert.equal(count(connect()), 50n)
      commitRandom(db, 5) // starts the WAL over
      assert.equal(discard(db), 1n)
      assert.equal(count(afterCrash()), 50n, 'the checkpointed transactions stay')
    })

    it('is gone for every connection at once, and the WAL goes on after the last kept commit', () => {
      const db = writer()
      assert.equal(addWalFunctions(db, true), true)
      const reader = connect()
      const kept = commitRandom(db, 10)
      assert.equal(count(reader), 10n)
      commitRandom(db, 20)
      assert.equal(count(reader), 30n)
      assert.equal(discard(db), 1n)
      // The wal-index was rebuilt from the WAL on disk: nobody reads the discarded commit again.
      assert.equal(count(reader), 10n)
      const later = commitRandom(writer(), 7)
      assertAllVisible(afterCrash(), [...kept, ...later], 17n)
      db.pragma('wal_checkpoint(TRUNCATE)')
      assertAllVisible(connect(), [...kept, ...later], 17n)
      assert.equal(db.pragma('integrity_check', { simple: true }), 'ok')
    })

    it('answers -1 and changes nothing once a checkpoint has copied the transaction', () => {
      const db = writer()
      assert.equal(addWalFunctions(db, true), true)
      commitRandom(db, 10)
      commitRandom(db, 20)
      connect().pragma('wal_checkpoint(PASSIVE)')
      assert.equal(discard(db), -1n)
      assert.equal(count(afterCrash()), 30n)
      assert.equal(count(connect()), 30n)
    })

    it('refuses to run inside a transaction, where a later commit would chain through what it cut', () => {
      const db = writer()
      assert.equal(addWalFunctions(db, true), true)
      commitRandom(db, 1)
      db.exec('BEGIN IMMEDIATE')
      assert.throws(() => discard(db), /no transaction open/)
      db.exec('ROLLBACK')
      assert.equal(count(connect()), 1n)
    })

    it('waits (SQLITE_BUSY) while a reader holds a snapshot, since the next writer would overwrite what it reads', () => {
      const db = writer()
      assert.equal(addWalFunctions(db, true), true)
      commitRandom(db, 10)
      commitRandom(db, 20)
      const reader = connect()
      reader.exec('BEGIN')
      assert.equal(count(reader), 30n)
      assert.throws(() => discard(db), { code: 'SQLITE_BUSY' })
      assert.equal(count(reader), 30n, 'the reader keeps its snapshot, whole')
      reader.exec('COMMIT')
      assert.equal(discard(db), 1n)
      assert.equal(count(reader), 10n)
    })

    it('answers -1 when a checkpoint began copying the transaction and never finished', () => {
      const db = writer()
      assert.equal(addWalFunctions(db, true), true)
      commitRandom(db, 10)
      commitRandom(db, 20)
      // What a checkpoint that died or failed mid-copy leaves in the wal-index: it records how far
      // it means to copy (nBackfillAttempted, offset 128) before it writes a page, and how far it
      // got (nBackfill, offset 96) only at the end. Some of its pages may be in the database file.
      const shm = fs.openSync(`${file}-shm`, 'r+')
      const attempted = Buffer.alloc(4)
      attempted.writeUInt32LE(fs.statSync(`${file}-wal`).size) // more frames than the WAL holds
      fs.writeSync(shm, attempted, 0, 4, 128)
      fs.closeSync(shm)
      assert.equal(discard(db), -1n)
      assert.equal(count(afterCrash()), 30n)
    })

    it('knows its commit in a WAL whose header another connection wrote', () => {
      const setup = writer()
      commitRandom(setup, 5)
      setup.pragma('wal_checkpoint(TRUNCATE)') // the WAL is empty when the next one opens it
      const db = writer()
      assert.equal(addWalFunctions(db, true), true)
      assert.equal(count(db), 5n)
      commitRandom(writer(), 1) // writes the WAL's header: db never sees the page size in it
      db.prepare("UPDATE plants SET name = 'discarded' WHERE rowid = (SELECT min(rowid) FROM plants)").run()
      assert.equal(discard(db), 1n)
      const recovered = afterCrash()
      assert.equal(count(recovered), 6n)
      assert.equal(
        recovered.prepare("SELECT count(*) FROM plants WHERE name = 'discarded'").pluck().get(),
        0n,
      )
    })

    it('leaves a transaction alone that another connection committed after', () => {
      const db = writer()
      assert.equal(addWalFunctions(db, true), true)
      commitRandom(db, 3)
      commitRandom(writer(), 4)
      assert.equal(discard(db), 0n)
      assert.equal(count(afterCrash()), 7n)
    })

    it("never takes another connection's frames for its own after a rollback left some behind", () => {
      const db = writer(10)
      assert.equal(addWalFunctions(db, true), true)
      commitRandom(db, 3)
      // A transaction that spilled frames into the WAL, then rolled back: they stay in the file.
      db.exec('BEGIN')
      const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)')
      for (let i = 0; i < 2000; i++) insert.run(randomId(), 'rolled back', 'green')
      db.exec('ROLLBACK')
      commitRandom(writer(), 4) // over the rolled-back frames
      commitRandom(db, 5)
      assert.equal(discard(db), 1n)
      assert.equal(count(afterCrash()), 7n, "the other connection's commit stays, this one's goes")
    })
  })

  it('commits a transaction larger than the page cache whole, its spilled frames rewritten in place', () => {
    // A 10-page cache spills dirty pages into the WAL mid-transaction; pages changed again are
    // rewritten over their earlier frames, and SQLite reads those frames back to checksum them.
    const db = writer(10)
    const reader = connect()
    const first = commitRandom(db, 200)
    const big = commitRandom(db, 5000)
    assertAllVisible(reader, [...first, ...big], 5200n)
    assert.equal(reader.pragma('integrity_check', { simple: true }), 'ok')
  })

  it('leaves nothing of a rolled-back transaction that had spilled frames', () => {
    const db = writer(10)
    const reader = connect()
    const kept = commitRandom(db, 100)
    const insert = db.prepare('INSERT INTO plants (id, name, tag) VALUES (?, ?, ?)')
    assert.throws(
      () =>
        db.transaction(() => {
          for (let i = 0; i < 3000; i++) insert.run(randomId(), 'lost', 'green')
          throw new Error('abandoned')
        })(),
      /abandoned/,
    )
    const after = commitRandom(db, 10)
    assertAllVisible(reader, [...kept, ...after], 110n)
    assert.equal(reader.prepare("SELECT count(*) FROM plants WHERE name = 'lost'").pluck().get(), 0n)
    assert.equal(reader.pragma('integrity_check', { simple: true }), 'ok')
  })

  it('fails the COMMIT whose WAL write fails, not the process, and keeps every earlier commit', () => {
    // Under a 2 MiB file-size limit the WAL's growth ends in EFBIG; the buffer holding the
    // transaction's frames is written inside SQLite's xWrite, which reports it as that error.
    const child = spawnSync(
      'bash',
      ['-c', 'ulimit -f 2048 && exec "$0" "$@"', process.execPath, childScript, file, 'file-size-limit'],
      { encoding: 'utf8', timeout: 60_000 },
    )
    assert.equal(child.status, 0, `status ${child.status}, signal ${child.signal}: ${child.stderr}`)
    const lines = child.stdout.trim().split('\n')
    assert.match(lines.at(-1) ?? '', /^error SQLITE_(IOERR_WRITE|FULL)$/)
    const acknowledged = lines.slice(0, -1).flatMap((line) => line.split(' ').map(BigInt))
    assert.ok(acknowledged.length >= 50, `${acknowledged.length} acknowledged ids`)
    assertExactlyStored(acknowledged)
  })

  for (const when of ['after-commit', 'mid-transaction'] as const) {
    it(`loses no acknowledged transaction when the process is killed ${when}, and recovers a sound file`, () => {
      // The child commits through the shim and prints each transaction's ids once COMMIT returned,
      // then dies by SIGKILL: right after its last COMMIT, or inside a transaction part of which
      // is already in the WAL with no commit frame.
      const child = spawnSync(process.execPath, [childScript, file, when], {
        encoding: 'utf8',
        timeout: 60_000,
      })
      assert.equal(child.signal, 'SIGKILL', child.stderr)
      const acknowledged = child.stdout
        .trim()
        .split('\n')
        .flatMap((line) => line.split(' ').map(BigInt))
      assert.equal(acknowledged.length, 2000)
      // Recovery keeps the acknowledged transactions and none of the killed one.
      assertExactlyStored(acknowledged)
    })
  }
})
