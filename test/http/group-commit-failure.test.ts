/**
 * The performance issue's rule for group commit, as a client sees it: when the transaction of a
 * batch fails, every request that was in it gets an error in the Error shape, none of its plants
 * is stored, and the batches before and after it are unaffected. The store is a real SQLite file;
 * another connection on it makes the batch fail for real (a deferred foreign key is checked only
 * at COMMIT, so COMMIT itself is what fails). The PostgreSQL batch has its storage-level test in
 * test/storage/postgres.test.ts.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import Database from 'better-sqlite3'
import type { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.js'
import { startService, type TestService, waitFor } from '../helpers.js'
import { type ApiResponse, request } from '../http-client.js'

describe('POST /plants when a group-committed batch fails (sqlite)', () => {
  let service: TestService
  let token: string
  let file: string
  const post = (id: number, name: string) =>
    request('POST', `${service.url}/plants`, { token, body: { id, name, tag: 'batch' } })
  const read = (id: number) => request('GET', `${service.url}/plants/${id}`, { token })
  const writer = () => (service.storage as SqliteStorage).stats()

  /** A connection of its own, as another process would have. */
  function withConnection(work: (db: Database.Database) => void): void {
    const db = new Database(file)
    try {
      work(db)
    } finally {
      db.close()
    }
  }

  /**
   * Sends the creates so that they share one batch: another connection holds the write lock while
   * a first "plug" create waits for it, so every create sent meanwhile queues behind the plug and
   * the writer takes them all as the next batch once the lock is released.
   */
  async function inOneBatch(creates: [number, string][]): Promise<ApiResponse[]> {
    const lock = new Database(file)
    lock.exec('BEGIN IMMEDIATE')
    const started = writer().batchesStarted
    const plug = post(900 + started, 'plug')
    await waitFor('the plug to wait for the lock', () => writer().batchesStarted === started + 1)
    const answers = Promise.all(creates.map(([id, name]) => post(id, name)))
    await waitFor('every create to queue behind the plug', () => writer().queued === creates.length)
    lock.exec('COMMIT')
    lock.close()
    assert.equal((await plug).status, 200, 'the batch before is unaffected')
    const responses = await answers
    assert.equal(writer().batchesStarted, started + 2, 'the creates formed one batch')
    return responses
  }

  before(async () => {
    service = await startService('sqlite')
    token = await service.token()
    file = service.env.PLANT_STORE_DB as string
  })
  after(() => service.close())

  it('answers every request of a batch whose COMMIT fails with a 500 Error, and stores none', async () => {
    assert.equal((await post(1, 'stored before')).status, 200)
    withConnection((db) =>
      db.exec(`CREATE TABLE guard_parent (id INTEGER PRIMARY KEY);
               CREATE TABLE guard_child (parent INTEGER REFERENCES guard_parent (id) DEFERRABLE INITIALLY DEFERRED);
               CREATE TRIGGER guard AFTER INSERT ON plants WHEN NEW.name = 'orphan'
               BEGIN INSERT INTO guard_child VALUES (42); END`),
    )
    const failedBefore = writer().batchesFailed
    const responses = await inOneBatch([
      [10, 'fine'],
      [11, 'orphan'],
      [12, 'fine too'],
      [1, 'stored before'],
    ])
    for (const [i, response] of responses.entries()) {
      assert.equal(response.status, 500, `request ${i} fails with its batch: ${response.text}`)
      assert.deepEqual(Object.keys(response.json).sort(), ['code', 'error', 'message'])
      assert.equal(response.json.error, 500)
      assert.equal(response.json.code, 'INTERNAL')
    }
    assert.equal(writer().batchesFailed, failedBefore + 1)
    for (const id of [10, 11, 12]) assert.equal((await read(id)).status, 404, `plant ${id} is not stored`)
    assert.deepEqual((await read(1)).json, { id: 1, name: 'stored before', tag: 'batch' })

    withConnection((db) => db.exec('DROP TRIGGER guard'))
    assert.equal((await post(10, 'fine')).status, 200, 'the batch after works')
    assert.deepEqual((await read(10)).json, { id: 10, name: 'fine', tag: 'batch' })
  })

  it('answers every request of a batch whose statement fails with a 500 Error, and stores none', async () => {
    withConnection((db) =>
      db.exec(`CREATE TRIGGER poison BEFORE INSERT ON plants WHEN NEW.name = 'poison'
               BEGIN SELECT RAISE(ABORT, 'poisoned plant refused'); END`),
    )
    const responses = await inOneBatch([
      [20, 'fine'],
      [21, 'poison'],
      [22, 'fine too'],
    ])
    for (const response of responses) {
      assert.equal(response.status, 500, response.text)
      assert.equal(response.json.error, 500)
      assert.doesNotMatch(response.text, /poison/, 'nothing internal leaks into the message')
    }
    for (const id of [20, 21, 22]) assert.equal((await read(id)).status, 404, `plant ${id} is not stored`)
    withConnection((db) => db.exec('DROP TRIGGER poison'))
    assert.equal((await post(20, 'fine')).status, 200)
  })
})
