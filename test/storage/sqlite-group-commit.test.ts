/**
 * Group commit in the SQLite store: concurrent creates share transactions, each is answered only
 * after its batch committed, a failing batch stores none of its requests and answers all of them
 * with the error, and an acknowledged create survives SIGKILL. Real files and real failures only.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { afterEach, beforeEach, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import type { SyncFile } from '../../src/storage/sqlite/group-commit.js'
import { type SqliteOptions, SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.js'
import { type CreateOutcome, StoreUnavailableError } from '../../src/storage/storage.js'
import { at, create, payloadOf, plant, readPlant } from './fixtures.js'

const here = path.dirname(fileURLToPath(import.meta.url))
let dir: string
let file: string
const stores: SqliteStorage[] = []

function open(options: Partial<SqliteOptions> = {}, syncFile?: SyncFile): SqliteStorage {
  const store = new SqliteStorage({ path: file, synchronous: 'full', ...options }, syncFile)
  stores.push(store)
  return store
}

/** A connection of its own, as another process would have. */
function withConnection<T>(work: (db: Database.Database) => T): T {
  const db = new Database(file)
  db.defaultSafeIntegers(true)
  try {
    return work(db)
  } finally {
    db.close()
  }
}

const storedIds = (ids: bigint[]) =>
  withConnection((db) => ids.filter((id) => db.prepare('SELECT 1 FROM plants WHERE id = ?').get(id)))

/** A sync that fails with EIO when told to: each one asked for adds its cue to `cues`. */
const failOnCue =
  (cues: Array<() => void>): SyncFile =>
  (_fd, done) =>
    cues.push(() => done(Object.assign(new Error('EIO'), { code: 'EIO' })))

async function until(condition: () => boolean): Promise<void> {
  for (let waited = 0; !condition(); waited += 5) {
    assert.ok(waited < 5000, 'timed out waiting')
    await sleep(5)
  }
}

/**
 * Runs the creates that `fire` starts as one batch, deterministically: another connection holds
 * the write lock while a first "plug" create blocks the writer inside BEGIN IMMEDIATE (its batch
 * is formed once batchesStarted moves), so everything fired meanwhile queues up behind it and is
 * taken as the next batch when the lock is released. Reads are checked to go on meanwhile.
 */
async function inOneBatch(store: SqliteStorage, fire: () => Promise<CreateOutcome>[]) {
  const lock = new Database(file)
  lock.exec('BEGIN IMMEDIATE')
  const before = store.stats()
  const plug = create(store, plant(-1n, 'plug'))
  await until(() => store.stats().batchesStarted === before.batchesStarted + 1)
  const settled = Promise.allSettled(fire())
  assert.equal(await readPlant(store, -1n), undefined, 'reads go on, and see nothing uncommitted')
  lock.exec('COMMIT')
  lock.close()
  assert.equal((await plug).kind, 'created')
  const results = await settled
  assert.equal(store.stats().batchesStarted, before.batchesStarted + 2, 'the fired creates formed one batch')
  return results
}

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-group-commit-'))
  file = path.join(dir, 'plants.db')
})

afterEach(async () => {
  await Promise.all(stores.splice(0).map((store) => store.close()))
  fs.rmSync(dir, { recursive: true, force: true })
})

describe('sqlite group commit', () => {
  it('stores 500 concurrent creates in fewer transactions than requests', async () => {
    const store = open()
    const ids = Array.from({ length: 500 }, (_, i) => BigInt(i) * 7919n - 2n ** 62n)
    const outcomes = await Promise.all(ids.map((id) => create(store, plant(id, `p${id}`))))
    assert.ok(outcomes.every((o) => o.kind === 'created'))
    assert.equal(storedIds(ids).length, 500)
    const stats = store.stats()
    assert.equal(stats.requestsCommitted, 500)
    assert.ok(stats.batchesCommitted < 500, `${stats.batchesCommitted} transactions for 500 creates`)
    assert.ok(stats.largestBatch > 1)
  })

  it('runs same-id requests in one batch exactly as if they came one after the other', async () => {
    const store = open()
    const results = await inOneBatch(store, () => [
      create(store, plant(5n, 'fern', 'green')),
      create(store, plant(5n, 'fern', 'green')),
      create(store, plant(5n, 'palm', 'green')),
      create(store, plant(5n, 'fern')),
      create(store, plant(6n, 'cactus')),
      create(store, plant(6n, 'cactus')),
    ])
    const conflict = { kind: 'conflict', existing: plant(5n, 'fern', 'green') }
    const kinds = [{ kind: 'created' }, { kind: 'replayed' }, conflict, conflict]
    const expected = [...kinds, { kind: 'created' }, { kind: 'replayed' }]
    assert.deepEqual(
      results.map((r) => (r.status === 'fulfilled' ? r.value : r.reason)),
      expected,
    )
    assert.deepEqual(await readPlant(store, 5n), plant(5n, 'fern', 'green'))
  })

  it('enqueues webhooks for exactly the creates after a subscription changed within one batch', async () => {
    const store = open()
    const subscription = (id: string) => ({
      id,
      url: 'https://example.test/h',
      secret: 's',
      createdAt: at(0),
    })
    const results = await inOneBatch(store, () => [
      create(store, plant(1n, 'before any subscriber')),
      store.addSubscription(subscription('a')).then(() => ({ kind: 'created' }) as const),
      create(store, plant(2n, 'after a')),
      store.removeSubscription('a').then(() => ({ kind: 'created' }) as const),
      create(store, plant(3n, 'after a left')),
    ])
    assert.ok(results.every((r) => r.status === 'fulfilled'))
    const deliveries = await store.listDeliveries({ failedOnly: false, limit: 10 })
    const forPlants = (ids: bigint[]) =>
      deliveries.filter((d) => ids.includes(d.plantId)).map((d) => d.plantId)
    assert.deepEqual(forPlants([1n, 2n, 3n]), [2n], 'only the create made while a subscriber existed')
  })

  it('answers every request of a batch whose transaction fails with the error, and stores none', async () => {
    const store = open()
    await store.addSubscription({ id: 'sub', url: 'https://example.test/h', secret: 's', createdAt: at(0) })
    assert.equal((await create(store, plant(1n, 'stored before'))).kind, 'created')
    // A real constraint of the schema, installed by another connection: one row of the batch fails.
    withConnection((db) =>
      db.exec(`CREATE TRIGGER poison BEFORE INSERT ON plants WHEN NEW.name = 'poison'
               BEGIN SELECT RAISE(ABORT, 'poisoned plant refused'); END`),
    )
    const batch = [
      plant(10n, 'fine'),
      plant(1n, 'stored before'),
      plant(11n, 'poison'),
      plant(12n, 'fine too'),
    ]
    const results = await inOneBatch(store, () => batch.map((p) => create(store, p)))
    for (const [i, result] of results.entries()) {
      assert.equal(result.status, 'rejected', `request ${i} must fail with its batch`)
      assert.match((result as PromiseRejectedResult).reason.message, /poisoned plant refused/)
    }
    assert.deepEqual(storedIds([10n, 11n, 12n]), [], 'none of the batch is stored')
    assert.deepEqual(await readPlant(store, 1n), plant(1n, 'stored before'))
    const deliveries = await store.listDeliveries({ failedOnly: false, limit: 100 })
    assert.deepEqual(deliveries.map((d) => d.plantId).sort(), [-1n, 1n], 'no outbox row of the failed batch')
    assert.equal(store.stats().batchesFailed, 1)

    assert.deepEqual(await create(store, plant(10n, 'fine')), { kind: 'created' }, 'the next batch works')
    assert.deepEqual(await create(store, plant(12n, 'fine too')), { kind: 'created' })
  })

  it('answers every request of a batch whose COMMIT itself fails with the error, and stores none', async () => {
    const store = open()
    assert.equal((await create(store, plant(1n, 'stored before'))).kind, 'created')
    // A deferred foreign key is checked at COMMIT: every statement of the batch succeeds, and the
    // COMMIT statement is what fails (SQLite then leaves the transaction open; it must be undone).
    withConnection((db) =>
      db.exec(`CREATE TABLE guard_parent (id INTEGER PRIMARY KEY);
               CREATE TABLE guard_child (parent INTEGER REFERENCES guard_parent (id) DEFERRABLE INITIALLY DEFERRED);
               CREATE TRIGGER guard AFTER INSERT ON plants WHEN NEW.name = 'orphan'
               BEGIN INSERT INTO guard_child VALUES (42); END`),
    )
    const batch = [plant(10n, 'fine'), plant(11n, 'orphan'), plant(12n, 'fine too')]
    const results = await inOneBatch(store, () => batch.map((p) => create(store, p)))
    for (const [i, result] of results.entries()) {
      assert.equal(result.status, 'rejected', `request ${i} must fail with its batch`)
      assert.match((result as PromiseRejectedResult).reason.message, /FOREIGN KEY constraint failed/)
    }
    assert.deepEqual(storedIds([10n, 11n, 12n]), [], 'none of the batch is stored')
    const orphans = withConnection(
      (db) => db.prepare('SELECT count(*) AS n FROM guard_child').get() as { n: bigint },
    )
    assert.equal(orphans.n, 0n)
    assert.deepEqual(await create(store, plant(10n, 'fine')), { kind: 'created' }, 'the next batch works')
    assert.deepEqual(storedIds([10n]), [10n])
  })

  it('syncs the WAL only for batches that changed something: an idle webhook poll costs no fsync', async () => {
    let syncs = 0
    const counting: SyncFile = (fd, done) => {
      syncs++
      fs.fdatasync(fd, done)
    }
    const store = open({}, counting)
    assert.equal((await create(store, plant(1n, 'synced'))).kind, 'created')
    assert.equal(syncs, 1)
    const claimed = await store.claimDeliveries({
      owner: 'test',
      now: new Date(),
      leaseUntil: new Date(Date.now() + 60_000),
      limit: 10,
      perSubscription: 4,
      excludeSubscriptions: [],
    })
    assert.deepEqual(claimed, [])
    assert.equal(await store.revokeToken('tok_none'), false)
    assert.equal(syncs, 1, 'a batch that wrote nothing is not synced')
    assert.equal((await create(store, plant(1n, 'synced'))).kind, 'replayed')
    assert.equal(syncs, 1, 'nor is a replayed create')
    assert.equal((await create(store, plant(2n, 'synced'))).kind, 'created')
    assert.equal(syncs, 2)
  })

  it('fails a whole batch with StoreUnavailableError when another process holds the lock too long', async () => {
    const store = open({ busyTimeoutMs: 50 })
    await store.ping()
    const lock = new Database(file)
    lock.exec('BEGIN IMMEDIATE')
    const ids = Array.from({ length: 20 }, (_, i) => BigInt(100 + i))
    const results = await Promise.allSettled(ids.map((id) => create(store, plant(id, 'blocked'))))
    lock.exec('COMMIT')
    lock.close()
    for (const result of results) {
      assert.equal(result.status, 'rejected')
      assert.ok((result as PromiseRejectedResult).reason instanceof StoreUnavailableError)
    }
    assert.deepEqual(storedIds(ids), [])
    assert.equal((await create(store, plant(100n, 'blocked'))).kind, 'created', 'it recovers')
  })

  it('answers each write within the busy timeout of its arrival, however many batches wait for the lock', async () => {
    // Small batches, so that the writes wait in several: timed per batch, the last ones waited
    // for each batch's timeout in turn.
    const store = open({ busyTimeoutMs: 300, maxBatch: 10 })
    await store.ping()
    const lock = new Database(file)
    lock.exec('BEGIN IMMEDIATE')
    try {
      const waits = await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const started = performance.now()
          await assert.rejects(create(store, plant(BigInt(1000 + i), 'queued')), StoreUnavailableError)
          return performance.now() - started
        }),
      )
      const slowest = Math.round(Math.max(...waits))
      // Four batches of 300 ms each would be 1,200 ms; one timeout and a retry's pause is ~350.
      assert.ok(slowest < 800, `a write waited ${slowest} ms for a 300 ms busy timeout`)
    } finally {
      lock.exec('ROLLBACK')
      lock.close()
    }
    assert.equal((await create(store, plant(1000n, 'after'))).kind, 'created', 'it recovers')
  })

  it('writes the outbox rows in the batch transaction: one per subscriber when created, none on replay', async () => {
    const store = open()
    for (const id of ['a', 'b'])
      await store.addSubscription({ id, url: `https://example.test/${id}`, secret: 's', createdAt: at(0) })
    const fern = plant(7n, 'fern', 'green')
    await inOneBatch(store, () => [create(store, fern), create(store, fern), create(store, plant(7n, 'x'))])
    assert.deepEqual(await create(store, fern), { kind: 'replayed' })
    const rows = (await store.listDeliveries({ failedOnly: false, limit: 100 })).filter(
      (d) => d.plantId === 7n,
    )
    assert.deepEqual(rows.map((d) => d.subscriptionId).sort(), ['a', 'b'])
    assert.ok(rows.every((d) => d.payload === payloadOf(fern) && d.status === 'pending'))
  })

  it('acknowledges only committed creates: another connection sees each one at once', async () => {
    const store = open()
    for (let id = 1n; id <= 20n; id++) {
      await create(store, plant(id, 'seen'))
      assert.deepEqual(storedIds([id]), [id], `plant ${id} committed before its answer`)
    }
  })

  it('loses no acknowledged create when the process is killed with SIGKILL', async () => {
    const child = spawn(process.execPath, [path.join(here, 'sqlite-crash-child.js'), file, '1000'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = new Promise((resolve) => child.once('exit', resolve))
    const acked: bigint[] = []
    for await (const line of createInterface({ input: child.stdout })) {
      acked.push(BigInt(line))
      if (acked.length >= 300) break
    }
    child.kill('SIGKILL')
    await exited
    assert.equal(acked.length, 300)
    assert.equal(storedIds(acked).length, acked.length, 'every acknowledged plant is in the file')
  })

  it('finishes accepted writes on close, then refuses new ones', async () => {
    const store = open()
    const ids = Array.from({ length: 100 }, (_, i) => BigInt(i + 1))
    const pending = ids.map((id) => create(store, plant(id, 'late')))
    await store.close()
    assert.ok((await Promise.all(pending)).every((o) => o.kind === 'created'))
    assert.equal(storedIds(ids).length, 100)
    await assert.rejects(create(store, plant(999n, 'after close')))
  })

  it('answers a batch only after the WAL sync, and reads meanwhile show the last durable state', async () => {
    const synced: Array<() => void> = []
    const gated: SyncFile = (fd, done) => synced.push(() => fs.fdatasync(fd, done))
    const store = open({}, gated)
    let answered = false
    const pending = create(store, plant(1n, 'syncing')).then((outcome) => {
      answered = true
      return outcome
    })
    await until(() => synced.length === 1)
    assert.deepEqual(storedIds([1n]), [1n], 'committed to the file')
    await sleep(20)
    assert.equal(answered, false, 'not answered before its sync returned')
    assert.equal(await readPlant(store, 1n), undefined, 'not shown to readers before it is durable')
    const list = await store.listPlantsJson({ limit: 10 })
    assert.equal(list.json, '[]')
    synced.shift()?.()
    assert.deepEqual(await pending, { kind: 'created' })
    assert.deepEqual(await readPlant(store, 1n), plant(1n, 'syncing'))
    assert.match(
      (await store.listPlantsJson({ limit: 10 })).json,
      /"syncing"/,
      'the cached first page moved on',
    )

    // A delete of a plant read just before: shown only once durable, and then at once.
    assert.deepEqual(await readPlant(store, 1n), plant(1n, 'syncing'), 'read again')
    let deleted = false
    const deleting = store.deletePlant(1n).then((outcome) => {
      deleted = true
      return outcome
    })
    await until(() => synced.length === 1)
    assert.deepEqual(storedIds([1n]), [], 'the delete is committed to the file')
    assert.equal(deleted, false)
    assert.deepEqual(await readPlant(store, 1n), plant(1n, 'syncing'), 'still the last durable state')
    synced.shift()?.()
    assert.equal(await deleting, true)
    assert.equal(await readPlant(store, 1n), undefined, 'the plant is gone once the delete is')
  })

  it("shows another process's acknowledged writes to a read made while its own commit syncs", async () => {
    const synced: Array<() => void> = []
    const gated: SyncFile = (fd, done) => synced.push(() => fs.fdatasync(fd, done))
    const store = open({}, gated)
    // A store of its own on the same file: connections, writer and syncs, as another process has.
    const other = open()
    assert.deepEqual(await create(other, plant(5n, 'to delete')), { kind: 'created' })
    assert.match((await store.listPlantsJson({ limit: 10 })).json, /"to delete"/, 'a first page cached')

    const pending = create(store, plant(1n, 'syncing'))
    await until(() => synced.length === 1)
    assert.deepEqual(await readPlant(store, 5n), plant(5n, 'to delete'), 'nobody else committed: no wait')
    assert.deepEqual(await create(other, plant(2n, 'elsewhere')), { kind: 'created' })
    assert.equal(await other.deletePlant(5n), true)

    let done = 0
    const reading = readPlant(store, 2n).finally(() => done++)
    const listing = store.listPlantsJson({ limit: 10 }).finally(() => done++)
    await sleep(20)
    assert.equal(done, 0, 'the reads wait for the held snapshot to be released')
    synced.shift()?.()
    assert.deepEqual(await reading, plant(2n, 'elsewhere'))
    const page = (await listing).json
    assert.match(page, /"elsewhere"/)
    assert.match(page, /"syncing"/, 'its own create, synced by then')
    assert.doesNotMatch(page, /"to delete"/)
    assert.deepEqual(await pending, { kind: 'created' })
  })

  it('lets reads that wait for a release go on when the sync fails instead, on what the file holds', async () => {
    const failing: Array<() => void> = []
    const store = open({}, failOnCue(failing))
    const other = open()
    const pending = create(store, plant(1n, 'kept'))
    await until(() => failing.length === 1)
    assert.deepEqual(await create(other, plant(2n, 'elsewhere')), { kind: 'created' })
    const reading = readPlant(store, 1n)
    failing.shift()?.()
    // Another connection committed after it, so the commit stays (a restart would find it too),
    // and the reads that waited show the file as it is: that commit, and the other's.
    await assert.rejects(
      pending,
      /its commit could not be discarded \(another connection committed after it\)/,
    )
    assert.deepEqual(await reading, plant(1n, 'kept'))
    assert.deepEqual(await readPlant(store, 2n), plant(2n, 'elsewhere'))
  })

  it('makes reads wait while it takes back a failed commit, then shows the store without it', async () => {
    const failing: Array<() => void> = []
    const store = open({}, failOnCue(failing))
    const other = open()
    assert.deepEqual(await create(other, plant(1n, 'acknowledged')), { kind: 'created' })
    const pending = create(store, plant(2n, 'refused'))
    await until(() => failing.length === 1)
    // Another connection on a snapshot that holds the commit: the discard waits for it to end.
    const reader = new Database(file)
    reader.exec('BEGIN')
    assert.equal(reader.prepare('SELECT count(*) FROM plants').pluck().get(), 2)
    failing.shift()?.()
    let read: unknown = 'not yet'
    void readPlant(store, 1n).then((found) => (read = found))
    await sleep(50)
    assert.equal(read, 'not yet', 'a read waits while the commit is being taken back')
    reader.exec('COMMIT')
    reader.close()
    await assert.rejects(pending, /its commit is discarded: none of its writes is kept/)
    await until(() => read !== 'not yet')
    assert.deepEqual(read, plant(1n, 'acknowledged'))
    assert.equal(await readPlant(store, 2n), undefined)
    assert.equal(await readPlant(other, 2n), undefined, 'gone for every connection on the file')
  })

  it('refuses every write after a failed WAL sync and reports unhealthy, without hanging', async () => {
    let fail = false
    const flaky: SyncFile = (fd, done) => {
      if (!fail) return fs.fdatasync(fd, done)
      const error: NodeJS.ErrnoException = new Error('EIO: i/o error, fdatasync')
      error.code = 'EIO'
      setImmediate(() => done(error))
    }
    const store = open({}, flaky)
    assert.equal((await create(store, plant(1n, 'before'))).kind, 'created')
    fail = true
    const results = await Promise.allSettled([create(store, plant(2n, 'a')), create(store, plant(3n, 'b'))])
    for (const result of results) {
      assert.equal(result.status, 'rejected', 'a write whose sync failed is never acknowledged')
      const reason = (result as PromiseRejectedResult).reason
      assert.ok(reason instanceof StoreUnavailableError)
      assert.match(
        reason.message,
        /could not be synced; its commit is discarded: none of its writes is kept \(EIO/,
      )
    }
    assert.equal(await readPlant(store, 2n), undefined, 'reads stay on the last durable state')
    assert.deepEqual(await readPlant(store, 1n), plant(1n, 'before'))
    await assert.rejects(create(store, plant(4n, 'later')), StoreUnavailableError)
    await assert.rejects(store.ping(), StoreUnavailableError)
    // Closing checkpoints the WAL into the database file: the discarded commit is not in it.
    await store.close()
    const ids = withConnection((db) => db.prepare('SELECT id FROM plants ORDER BY id').pluck().all())
    assert.deepEqual(ids, [1n])
    assert.equal(fs.existsSync(`${file}-wal`), false, 'the last connection checkpointed and removed the WAL')
  })

  it('checkpoints in its own thread and reuses the WAL from its start under steady writes', async () => {
    const store = open()
    let next = 0n
    const writers = (count: number) =>
      Promise.all(
        Array.from({ length: 4 }, async () => {
          for (let i = 0; i < count; i++) await create(store, plant(next++, 'steady'))
        }),
      )
    // The checkpointer thread starts with the first checkpoint, and commits go on while it loads;
    // the WAL's length then stays as it is (SQLite does not shrink it), so measure growth after it.
    await writers(100)
    const deadline = Date.now() + 10_000
    while (store.stats().checkpoints === 0 && Date.now() < deadline) await sleep(10)
    const before = store.stats()
    assert.ok(before.checkpoints >= 1, 'no first checkpoint within 10 s')
    const walBefore = fs.statSync(`${file}-wal`).size

    // Four writers: batches of at most four, so at least 800 commits, each appending a frame or
    // more (two here: the table's leaf and the page that counts the file's changes).
    await writers(800)
    const stats = store.stats()
    const commits = stats.batchesCommitted - before.batchesCommitted
    assert.equal(stats.requestsCommitted - before.requestsCommitted, 3200)
    assert.ok(commits >= 800, `${commits} commits`)
    assert.ok(stats.checkpoints - before.checkpoints >= 4, `${stats.checkpoints} checkpoints`)
    const frame = 24 + 4096
    const growth = fs.statSync(`${file}-wal`).size - walBefore
    assert.ok(
      growth < (commits / 2) * frame,
      `WAL grew by ${growth} bytes in ${commits} commits: ${JSON.stringify(stats)}`,
    )
  })
})
