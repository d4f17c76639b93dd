import assert from 'node:assert/strict'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import Database from 'better-sqlite3'
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
      assert.deepEqual(migrateSqlite(db), [1, 2, 3])
      assert.deepEqual(migrateSqlite(db), [])
      const versions = db.prepare('SELECT version FROM schema_migrations ORDER BY version').pluck().all()
      assert.deepEqual(versions, [1, 2, 3])
    } finally {
      db.close()
    }
  })
})
