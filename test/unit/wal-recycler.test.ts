import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { CheckpointMode } from '../../src/storage/sqlite/checkpoint-thread.js'
import type { CheckpointResult } from '../../src/storage/sqlite/checkpointer.js'
import { WalRecycler } from '../../src/storage/sqlite/wal-recycler.js'

const settle = () => new Promise((resolve) => setImmediate(resolve))

/**
 * A recycler whose checkpoints finish when the test says: `commit(n)` is n batches done (while a
 * checkpoint runs, they are the commits that land during it), `finish()` ends the running one.
 */
function scripted() {
  const asked: CheckpointMode[] = []
  let pending: ((result: CheckpointResult) => void) | undefined
  let resumed = 0
  const recycler = new WalRecycler(
    { path: 'unused', synchronous: 'full' },
    { batchActive: () => false, stopped: () => false, resume: () => resumed++ },
    {
      get running() {
        return pending !== undefined
      },
      checkpoint(mode: CheckpointMode) {
        asked.push(mode)
        return new Promise<CheckpointResult>((resolve) => (pending = resolve))
      },
      close: async () => {},
    },
  )
  return {
    recycler,
    asked,
    resumed: () => resumed,
    commit(count: number) {
      for (let i = 0; i < count; i++) recycler.batchDone()
    },
    async finish() {
      const resolve = pending
      assert.ok(resolve, 'no checkpoint is running')
      pending = undefined
      // Every frame the checkpoint saw was copied; what landed meanwhile is counted by commit().
      resolve({ log: 700, checkpointed: 700 })
      await settle()
    },
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
})
