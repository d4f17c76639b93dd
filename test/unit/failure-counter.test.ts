/** The failed-authentication counter: fixed windows, a bounded table that forgets no live window. */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { FailureCounter } from '../../src/http/failure-counter.js'

describe('FailureCounter', () => {
  it('counts within a window from the first hit, and starts again once it ends', () => {
    const counter = new FailureCounter(10, 1000)
    assert.deepEqual(counter.hit('a', 0), { count: 1, endsInMs: 1000 })
    assert.deepEqual(counter.hit('a', 400), { count: 2, endsInMs: 600 })
    assert.deepEqual(counter.hit('a', 1000), { count: 1, endsInMs: 1000 })
  })

  it('when full of live windows, tells a new key `full` until the oldest ends, then makes room', () => {
    const counter = new FailureCounter(2, 1000)
    counter.hit('a', 0)
    counter.hit('b', 500)
    assert.deepEqual(counter.hit('c', 600), { full: true, endsInMs: 400 })
    assert.deepEqual(counter.hit('a', 700), { count: 2, endsInMs: 300 }, 'a is still counted')
    assert.deepEqual(
      counter.hit('c', 1000),
      { count: 1, endsInMs: 1000 },
      "a's window ended: its place is free",
    )
    assert.equal(counter.size, 2)
  })

  it('sweeps ended windows, so the table shrinks back', () => {
    const counter = new FailureCounter(1000, 1000)
    for (let i = 0; i < 500; i++) counter.hit(`k${i}`, i)
    counter.hit('late', 2000)
    assert.equal(counter.size, 1)
  })
})
