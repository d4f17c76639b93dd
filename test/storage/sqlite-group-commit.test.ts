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
import { type SqliteOptions, SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.js'
import { type CreateOutcome, StoreUnavailableError } from '../../src/storage/storage.js'
import { at, create, payloadOf, plant, readPlant } from './fixtures.js'

const here = path.dirname(fileURLToPath(import.meta.url))
let dir: string
let file: string
const stores: SqliteStorage[] = []

function open(options: Partial<SqliteOptions> = {}): SqliteStorage {
  const store = new SqliteStorage({ path: file, synchronous: 'full', ...options })
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

  it('keeps the WAL bounded under steady writes: the writer checkpoints and truncates it', async () => {
    const store = open()
    let next = 0n
    let largest = 0
    // Four writers: batches of at most four, so at least 800 commits, each appending a frame or
    // more, well past the 1000 pages after which the writer thread checkpoints.
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let i = 0; i < 800; i++) {
          await create(store, plant(next++, 'steady'))
          largest = Math.max(largest, store.details().walBytes ?? 0)
        }
      }),
    )
    const stats = store.stats()
    assert.equal(stats.requestsCommitted, 3200)
    assert.ok(stats.batchesCommitted >= 800, `${stats.batchesCommitted} commits`)
    assert.ok(stats.checkpoints >= 1, `${stats.checkpoints} checkpoints`)
    // Sampled between commits: a commit that reached the threshold was checkpointed before its answer.
    const frames = Math.floor(largest / (24 + 4096))
    assert.ok(frames >= 900, `the WAL came near the checkpoint threshold (${frames} frames)`)
    assert.ok(frames < 1100, `the WAL held ${frames} frames at most, over ${stats.batchesCommitted} commits`)
  })
})
