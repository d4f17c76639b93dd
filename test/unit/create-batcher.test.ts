import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { CreateBatcher, type CreateRequest } from '../../src/storage/postgres/create-batcher.js'
import { type CreateOutcome, StoreUnavailableError } from '../../src/storage/storage.js'

/** Keeps the event loop busy for `ms`, as a saturated service would. */
function spin(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // busy on purpose
  }
}

/** A batch runner that holds every batch until released, and records how many ran at once. */
function heldRunner() {
  const held: (() => void)[] = []
  const batches: CreateRequest[][] = []
  let running = 0
  let mostAtOnce = 0
  const run = (batch: CreateRequest[]) =>
    new Promise<CreateOutcome[]>((resolve) => {
      batches.push(batch)
      mostAtOnce = Math.max(mostAtOnce, ++running)
      held.push(() => {
        running--
        resolve(batch.map(() => ({ kind: 'created' })))
      })
    })
  return {
    run,
    batches,
    mostAtOnce: () => mostAtOnce,
    resetCount: () => {
      mostAtOnce = running
    },
    releaseAll: () => held.splice(0).forEach((release) => release()),
  }
}

const plant = (id: number) => ({ id: BigInt(id), name: `plant ${id}` })

/** A deadline far enough away never to be met in these tests. */
const LATER = () => Date.now() + 60_000

/** Submits one create, then another on a later turn of the event loop, and settles everything. */
async function twoTurns(batcher: CreateBatcher, runner: ReturnType<typeof heldRunner>) {
  const first = batcher.submit(plant(1), LATER())
  await new Promise((resolve) => setImmediate(resolve))
  await new Promise((resolve) => setImmediate(resolve))
  const second = batcher.submit(plant(2), LATER())
  await new Promise((resolve) => setImmediate(resolve))
  await new Promise((resolve) => setImmediate(resolve))
  const atOnce = runner.mostAtOnce()
  runner.resetCount()
  // Releasing a batch may start the next one, held in turn: release until both are answered.
  while ((await Promise.race([Promise.all([first, second]), sleep(5).then(() => 'pending')])) === 'pending') {
    runner.releaseAll()
  }
  return { atOnce, outcomes: await Promise.all([first, second]) }
}

describe('PostgreSQL create batcher', () => {
  it('sends a second batch while the first runs when the event loop has been mostly idle', async () => {
    const runner = heldRunner()
    const batcher = new CreateBatcher(runner.run, 2, 256)
    // An idle event loop is the condition under test.
    await sleep(150)
    const { atOnce, outcomes } = await twoTurns(batcher, runner)
    assert.equal(atOnce, 2, 'both batches ran at once')
    assert.deepEqual(outcomes, [{ kind: 'created' }, { kind: 'created' }])
    assert.equal(runner.batches.length, 2)
  })

  it('runs one batch at a time when the event loop has been saturated, and the waiting creates form the next', async () => {
    const runner = heldRunner()
    const batcher = new CreateBatcher(runner.run, 2, 256)
    spin(150)
    const { atOnce, outcomes } = await twoTurns(batcher, runner)
    assert.equal(atOnce, 1, 'the second batch waited for the first')
    assert.deepEqual(outcomes, [{ kind: 'created' }, { kind: 'created' }])
    assert.deepEqual(
      runner.batches.map((batch) => batch.map((request) => request.plant.id)),
      [[1n], [2n]],
    )
  })

  it('answers every create by its deadline, sent or queued, and sends none already past it', async () => {
    const runner = heldRunner()
    const batcher = new CreateBatcher(runner.run, 1, 256)
    const started = Date.now()
    const due = started + 200
    const sent = batcher.submit(plant(1), due)
    await new Promise((resolve) => setImmediate(resolve))
    const all = [sent, batcher.submit(plant(2), due), batcher.submit(plant(3), due)]
    // The sleep also keeps the process alive: the batcher's timers do not (the HTTP server does).
    const patience = new AbortController()
    const settled = await Promise.race([
      Promise.allSettled(all),
      sleep(3000, 'still waiting', { signal: patience.signal }),
    ])
    patience.abort()
    const waited = Date.now() - started
    assert.ok(Array.isArray(settled), 'every create was answered')
    for (const result of settled) {
      assert.equal(result.status, 'rejected')
      assert.ok((result as PromiseRejectedResult).reason instanceof StoreUnavailableError)
    }
    assert.ok(waited >= 190, `answered after ${waited} ms, not before the deadline`)
    assert.equal(runner.batches.length, 1, 'only the first was sent: the others were never')
    // The held statement ends late: the next create goes out then, and is answered.
    runner.releaseAll()
    const later = batcher.submit(plant(4), LATER())
    while ((await Promise.race([later, sleep(5).then(() => 'pending')])) === 'pending') runner.releaseAll()
    assert.deepEqual(await later, { kind: 'created' })
    assert.deepEqual(
      runner.batches.map((batch) => batch.map((request) => request.plant.id)),
      [[1n], [4n]],
    )
  })

  it('answers each create of a batch by its own deadline, and runs the batch until the latest', async () => {
    const runner = heldRunner()
    const untils: number[] = []
    const batcher = new CreateBatcher(
      (batch, until) => {
        untils.push(until)
        return runner.run(batch)
      },
      1,
      256,
    )
    // The batcher's timers do not keep the process alive (the HTTP server does).
    const alive = setInterval(() => {}, 1000)
    const started = Date.now()
    const early = batcher.submit(plant(1), started + 100)
    const late = batcher.submit(plant(2), started + 60_000)
    const rejected = await early.then(
      () => undefined,
      (error: unknown) => error,
    )
    assert.ok(rejected instanceof StoreUnavailableError, 'the early one got its 503')
    assert.deepEqual(untils, [started + 60_000], 'the batch runs until its latest deadline')
    runner.releaseAll()
    assert.deepEqual(await late, { kind: 'created' }, 'the later one is still answered by the statement')
    clearInterval(alive)
  })

  it('goes back to two batches at once when the load is gone', async () => {
    const runner = heldRunner()
    const batcher = new CreateBatcher(runner.run, 2, 256)
    spin(150)
    assert.equal((await twoTurns(batcher, runner)).atOnce, 1)
    // An idle event loop again is the condition under test.
    await sleep(150)
    assert.equal((await twoTurns(batcher, runner)).atOnce, 2)
  })
})
