import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { sqliteMigrations } from '../../src/storage/sqlite/migrations.js'
import { migrateSqlite, SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.js'
import { storageContract } from './contract.js'

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-sqlite-'))
const file = path.join(dir, 'contract.db')

after(() => fs.rmSync(dir, { recursive: true, force: true }))

storageContract(
  'sqlite',
  async () => new SqliteStorage({ path: file, synchronous: 'full' }),
  // Every instance is closed before a reset, so removing the files (WAL included) empties the store.
  async () => {
    for (const suffix of ['', '-wal', '-shm']) fs.rmSync(file + suffix, { force: true })
  },
)

describe('sqlite migrations', () => {
  it('apply every version once, and nothing on a second run', () => {
    const db = new Database(path.join(dir, 'migrations.db'))
    try {
      assert.deepEqual(migrateSqlite(db), [1, 2, 3, 4, 5])
      assert.deepEqual(migrateSqlite(db), [])
      const versions = db.prepare('SELECT version FROM schema_migrations ORDER BY version').pluck().all()
      assert.deepEqual(versions, [1, 2, 3, 4, 5])
    } finally {
      db.close()
    }
  })

  it('start the attempt history with the last attempt of deliveries made before it', () => {
    const db = new Database(path.join(dir, 'history.db'))
    try {
      db.exec(`CREATE TABLE schema_migrations (
        version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
      for (const m of sqliteMigrations.filter((m) => m.version <= 3)) {
        db.exec(m.sql)
        db.prepare('INSERT INTO schema_migrations VALUES (?, ?, 0)').run(m.version, m.name)
      }
      const insert = db.prepare(`INSERT INTO webhook_deliveries (id, subscription_id, plant_id, payload,
        status, attempts, next_attempt_at, last_attempt_at, last_status, last_error, created_at)
        VALUES (?, 's', 1, '{}', ?, ?, 0, ?, ?, ?, 0)`)
      insert.run('retrying', 'pending', 2, 2000, 500, 'HTTP 500')
      insert.run('delivered', 'delivered', 1, 3000, 204, null)
      insert.run('untried', 'pending', 0, null, null, null)
      insert.run('removed', 'failed', 1, 4000, 503, 'subscription removed')
      assert.deepEqual(migrateSqlite(db), [4, 5])
      assert.deepEqual(db.prepare('SELECT * FROM webhook_attempts ORDER BY delivery_id').all(), [
        { delivery_id: 'delivered', attempt: 1, at: 3000, status: 204, error: null },
        { delivery_id: 'retrying', attempt: 2, at: 2000, status: 500, error: 'HTTP 500' },
      ])
    } finally {
      db.close()
    }
  })
})

describe('sqlite store files', () => {
  it('makes a new store private: folders 0700, database, WAL and shared memory 0600', async () => {
    const previous = process.umask(0o022)
    try {
      const store = path.join(dir, 'private', 'nested', 'plants.db')
      const storage = new SqliteStorage({ path: store, synchronous: 'full' })
      try {
        for (const folder of [path.join(dir, 'private'), path.dirname(store)]) {
          assert.equal(fs.statSync(folder).mode & 0o777, 0o700, folder)
        }
        for (const suffix of ['', '-wal', '-shm']) {
          assert.equal(fs.statSync(store + suffix).mode & 0o777, 0o600, store + suffix)
        }
      } finally {
        await storage.close()
      }
    } finally {
      process.umask(previous)
    }
  })

  it('leaves the mode of an existing store file as its operator set it', async () => {
    const store = path.join(dir, 'shared.db')
    fs.writeFileSync(store, '')
    fs.chmodSync(store, 0o640)
    const storage = new SqliteStorage({ path: store, synchronous: 'full' })
    await storage.close()
    assert.equal(fs.statSync(store).mode & 0o777, 0o640)
  })
})
