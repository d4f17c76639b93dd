import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { PressureSampler } from '../../src/http/load-shedding.js'

describe('the load-shedding sampler', () => {
  it('keeps its last values, and counts and reports a sample that fails, instead of throwing', () => {
    const reported: unknown[] = []
    let heap: () => number = () => 1234
    const sampler = new PressureSampler(
      (error) => reported.push(error),
      () => heap(),
    )
    try {
      sampler.sample()
      assert.equal(sampler.last.heapUsedBytes, 1234)
      // What process.memoryUsage() throws with no descriptor left.
      const emfile = Object.assign(new Error('EMFILE: too many open files, uv_resident_set_memory'), {
        code: 'EMFILE',
      })
      heap = () => {
        throw emfile
      }
      assert.doesNotThrow(() => sampler.sample())
      assert.equal(sampler.failures, 1)
      assert.deepEqual(reported, [emfile])
      assert.equal(sampler.last.heapUsedBytes, 1234)
    } finally {
      sampler.stop()
    }
  })

  it('reads the heap from V8, which needs no descriptor', () => {
    const sampler = new PressureSampler(() => assert.fail('no sample should fail'))
    try {
      sampler.sample()
      assert.ok(sampler.last.heapUsedBytes > 0)
      assert.equal(sampler.failures, 0)
    } finally {
      sampler.stop()
    }
  })
})
