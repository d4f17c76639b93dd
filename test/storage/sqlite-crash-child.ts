/**
 * The process that `sqlite-group-commit.test.ts` kills with SIGKILL: it creates plants from
 * `start` upwards, 32 at a time, and prints each id on its own line once createPlant resolved
 * (stdout to a pipe is synchronous, so a printed id was acknowledged first). Without arguments
 * it does nothing, since the test runner may load every file under test/.
 */
import { SqliteStorage } from '../../src/storage/sqlite/sqlite-storage.js'
import { plant } from './fixtures.js'

const [file, start] = process.argv.slice(2)
if (file && start) {
  const store = new SqliteStorage({ path: file, synchronous: 'full' })
  let next = BigInt(start)
  const loop = async () => {
    for (;;) {
      const p = plant(next++, 'acked')
      const outcome = await store.createPlant(p)
      if (outcome.kind !== 'created') throw new Error(`plant ${p.id} was ${outcome.kind}`)
      process.stdout.write(`${p.id}\n`)
    }
  }
  for (let i = 0; i < 32; i++) loop().catch((error) => process.stderr.write(`${error}\n`))
}
