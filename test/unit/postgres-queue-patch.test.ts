import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import path from 'node:path'
import { it } from 'node:test'
import { pathToFileURL } from 'node:url'
import v8 from 'node:v8'
import vm from 'node:vm'

/**
 * postgres.js 3.4.9 keeps its pool's connections and waiting queries in this queue. Unpatched, a
 * queue that never runs empty (a busy pool, or idle connections that are never all taken) keeps
 * one hole per shifted item forever and scans them all on every remove: memory grows with every
 * query and throughput fell from 40,000 to 12,000 queries/s within 12 s. patches/postgres+3.4.9.patch
 * (applied by `npm install`) fixes it; these tests fail if the patch is not in place.
 */
interface Queue<T> {
  readonly length: number
  push(item: T): T
  shift(): T | undefined
  remove(item: T): T | null
}

const postgresDir = path.dirname(createRequire(import.meta.url).resolve('postgres'))
const loadQueue = async (file: string) =>
  ((await import(pathToFileURL(file).href)) as { default: <T>() => Queue<T> }).default

const copies = {
  esm: path.join(postgresDir, '..', '..', 'src', 'queue.js'),
  cjs: path.join(postgresDir, 'queue.js'),
}

for (const [name, file] of Object.entries(copies)) {
  it(`postgres.js queue (${name}) behaves as a FIFO with removal`, async () => {
    const Queue = await loadQueue(file)
    const queue = Queue<number>()
    const model: number[] = []
    // A fixed pseudo-random sequence, so a failure is reproducible.
    let seed = 7
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed / 2 ** 31
    }
    let next = 0
    for (let step = 0; step < 20_000; step++) {
      const roll = random()
      if (roll < 0.45) assert.equal(queue.push(next), model.push(next) && next++)
      else if (roll < 0.8) assert.equal(queue.shift(), model.shift())
      else {
        // Present about half of the time, as when postgres.js moves a connection between queues.
        const item = Math.floor(random() * next)
        const at = model.indexOf(item)
        if (at !== -1) model.splice(at, 1)
        assert.equal(queue.remove(item), at === -1 ? null : item)
      }
      assert.equal(queue.length, model.length)
    }
  })

  it(`postgres.js queue (${name}) does not grow while it never runs empty`, async () => {
    const Queue = await loadQueue(file)
    v8.setFlagsFromString('--expose-gc')
    const gc = vm.runInNewContext('gc') as () => void
    const queue = Queue<object>()
    const items = [{}, {}, {}]
    for (const item of items) queue.push(item)
    const cycle = (times: number) => {
      for (let i = 0; i < times; i++) {
        // What the pool does per query on a busy connection: take it, then move it back.
        const item = queue.shift() as object
        queue.remove(item)
        queue.push(item)
      }
    }
    cycle(1000)
    gc()
    const before = process.memoryUsage().heapUsed
    cycle(100_000)
    gc()
    const grown = process.memoryUsage().heapUsed - before
    // Unpatched, 100,000 holes hold 800 kB (and the cycles take seconds, each scanning them all).
    assert.ok(grown < 200_000, `the queue grew by ${grown} bytes over 100,000 cycles`)
    assert.equal(queue.length, 3)
  })
}
