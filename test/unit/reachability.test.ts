import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Reachability } from '../../src/storage/postgres/reachability.js'
import { StoreUnavailableError } from '../../src/storage/storage.js'

const refused = () =>
  Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))

/** A piece of work that settles when told to, counting how often it was started. */
function controlled() {
  let settle: (ok: boolean) => void = () => {}
  let started = 0
  const work = () => {
    started++
    return new Promise<string>((resolve, reject) => {
      settle = (ok) =>
        ok ? resolve('ok') : reject(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }))
    })
  }
  return { work, settle: (ok: boolean) => settle(ok), started: () => started }
}

describe('Reachability', () => {
  it('lets every request through while the server is reachable', async () => {
    const reach = new Reachability()
    assert.deepEqual(await Promise.all([reach.run(async () => 1), reach.run(async () => 2)]), [1, 2])
  })

  it('after a refused connection, lets one probe through and fails the others at once', async () => {
    const reach = new Reachability()
    await assert.rejects(reach.run(refused), /ECONNREFUSED/)
    const probe = controlled()
    const probing = reach.run(probe.work)
    const other = controlled()
    await assert.rejects(reach.run(other.work), (error: unknown) => {
      assert.ok(error instanceof StoreUnavailableError)
      assert.match(
        (error as Error).message,
        /unreachable \(ECONNREFUSED for \d+ ms\); another request is retrying it/,
      )
      return true
    })
    assert.equal(other.started(), 0, 'the other request never waited for a connection')
    probe.settle(false)
    await assert.rejects(probing, /refused/)
    // Still unreachable: the next request is the next probe, and it finds the server back.
    assert.equal(await reach.run(async () => 'back'), 'back')
    assert.deepEqual(await Promise.all([reach.run(async () => 1), reach.run(async () => 2)]), [1, 2])
  })

  it('ends the outage on any failure that shows the server answered (a statement error)', async () => {
    const reach = new Reachability()
    await assert.rejects(reach.run(refused), /ECONNREFUSED/)
    const duplicate = Object.assign(new Error('duplicate key'), { code: '23505' })
    await assert.rejects(
      reach.run(() => Promise.reject(duplicate)),
      /duplicate key/,
    )
    assert.deepEqual(await Promise.all([reach.run(async () => 1), reach.run(async () => 2)]), [1, 2])
  })

  it('reads a refused connection out of an AggregateError (one error per address tried)', async () => {
    const reach = new Reachability()
    const both = new AggregateError([Object.assign(new Error('a'), { code: 'ECONNREFUSED' })], 'all failed')
    await assert.rejects(reach.run(() => Promise.reject(both)))
    const probe = controlled()
    const probing = reach.run(probe.work)
    await assert.rejects(
      reach.run(async () => 1),
      StoreUnavailableError,
    )
    probe.settle(true)
    assert.equal(await probing, 'ok')
  })
})
