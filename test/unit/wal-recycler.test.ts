import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { CheckpointMode } from '../../src/storage/sqlite/checkpoint-thread.js'
import { CheckpointFailure, type CheckpointResult } from '../../src/storage/sqlite/checkpointer.js'
import { WalRecycler } from '../../src/storage/sqlite/wal-recycler.js'

const settle = () => new Promise((resolve) => setImmediate(resolve))

/**
 * A recycler whose checkpoints finish when the test says: `commit(n)` is n batches done (while a
 * checkpoint runs, they are the commits that land during it), `finish()` ends the running one and
 * `fail(error)` fails it. The host stops, as the writer does, once told the file failed.
 */
function scripted() {
  const asked: CheckpointMode[] = []
  let pending: { resolve: (result: CheckpointResult) => void; reject: (error: Error) => void } | undefined
  let resumed = 0
  const fileFailures: Error[] = []
  const recycler = new WalRecycler(
    { path: 'unused', synchronous: 'full' },
    {
      batchActive: () => false,
      stopped: () => fileFailures.length > 0,
      resume: () => resumed++,
      databaseFileFailed: (error) => fileFailures.push(error),
    },
    {
      get running() {
        return pending !== undefined
      },
      checkpoint(mode: CheckpointMode) {
        asked.push(mode)
        return new Promise<CheckpointResult>((resolve, reject) => (pending = { resolve, reject }))
      },
      close: async () => {},
    },
  )
  const settleRunning = async (outcome: (p: NonNullable<typeof pending>) => void) => {
    const running = pending
    assert.ok(running, 'no checkpoint is running')
    pending = undefined
    outcome(running)
    await settle()
  }
  return {
    recycler,
    asked,
    fileFailures,
    resumed: () => resumed,
    commit(count: number) {
      for (let i = 0; i < count; i++) recycler.batchDone()
    },
    // Every frame the checkpoint saw was copied; what landed meanwhile is counted by commit().
    finish: () => settleRunning((running) => running.resolve({ log: 700, checkpointed: 700 })),
    fail: (error: Error) => settleRunning((running) => running.reject(error)),
  }
}

describe('WAL recycling', () => {
  it('holds writes for the RESTART once a passive checkpoint left at most one commit behind', async () => {
    const s = scripted()
    s.commit(100)
    assert.deepEqual(s.asked, ['PASSIVE'])
    s.commit(1)
    await s.finish()
    assert.deepEqual(s.asked, ['PASSIVE', 'RESTART'])
    assert.equal(s.recycler.holdsWrites, true)
    await s.finish()
    assert.equal(s.recycler.holdsWrites, false)
    assert.equal(s.resumed(), 1)
  })

  it('runs passive passes, without holding writes, while commits keep landing during them', async () => {
    const s = scripted()
    s.commit(100)
    s.commit(3)
    await s.finish()
    assert.deepEqual(s.asked, ['PASSIVE', 'PASSIVE'])
    assert.equal(s.recycler.holdsWrites, false, 'writes were held with three commits still to copy')
    s.commit(2)
    await s.finish()
    assert.deepEqual(s.asked, ['PASSIVE', 'PASSIVE', 'PASSIVE'])
    // This pass saw every commit: the WAL is copied, and the writer starts it over by itself.
    await s.finish()
    assert.deepEqual(s.asked, ['PASSIVE', 'PASSIVE', 'PASSIVE'])
    assert.equal(s.recycler.holdsWrites, false)
    assert.equal(s.resumed(), 0)
  })

  it('holds writes after three catch-up passes even if commits keep landing', async () => {
    const s = scripted()
    s.commit(100)
    for (let pass = 0; pass < 4; pass++) {
      s.commit(5)
      await s.finish()
    }
    assert.deepEqual(s.asked, ['PASSIVE', 'PASSIVE', 'PASSIVE', 'PASSIVE', 'RESTART'])
    assert.equal(s.recycler.holdsWrites, true)
    await s.finish()
    assert.equal(s.recycler.holdsWrites, false)
    // The next cycle starts with a full interval of commits again.
    s.commit(99)
    assert.equal(s.asked.length, 5)
    s.commit(1)
    assert.deepEqual(s.asked.slice(5), ['PASSIVE'])
  })

  it('stops checkpointing for good when one fails to write or sync the database file', async () => {
    const s = scripted()
    s.commit(100)
    s.commit(3)
    await s.fail(new CheckpointFailure('checkpoint failed: disk I/O error', 'SQLITE_IOERR_FSYNC'))
    assert.equal(s.fileFailures.length, 1)
    assert.equal(s.recycler.holdsWrites, false)
    // The WAL still holds pages the file may have lost: it must never be copied over and restarted.
    s.commit(500)
    assert.deepEqual(s.asked, ['PASSIVE'])
  })

  it('asks again after a checkpoint fails for any other reason', async () => {
    const s = scripted()
    s.commit(100)
    await s.fail(new Error('the checkpointer stopped: thread exited with code 1'))
    s.commit(100)
    assert.deepEqual(s.asked, ['PASSIVE', 'PASSIVE'])
    await s.fail(new CheckpointFailure('checkpoint failed: database is locked', 'SQLITE_BUSY'))
    assert.deepEqual(s.fileFailures, [])
    assert.equal(s.resumed(), 2)
    s.commit(99)
    assert.deepEqual(s.asked, ['PASSIVE', 'PASSIVE'])
    s.commit(1)
    assert.deepEqual(s.asked, ['PASSIVE', 'PASSIVE', 'PASSIVE'])
  })
})
