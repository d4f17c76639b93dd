/**
 * The performance issue's rule for group commit when what fails is the commit's WAL sync (a
 * failing disk, EIO): every request of the batch gets an error in the Error shape, and none of its
 * plants is there after a restart, whether the service was stopped or killed; what was
 * acknowledged before is. A preload makes the service's own fdatasync fail
 * (test/fixtures/fail-wal-sync.ts); the service is the real one, on a real file.
 */
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { pathToFileURL } from 'node:url'
import { createToken, projectRoot, serviceEnv, spawnService, stopService, waitFor } from '../helpers.js'
import { request } from '../http-client.js'

const preload = pathToFileURL(path.join(projectRoot, 'dist/test/fixtures/fail-wal-sync.js')).href

describe('POST /plants when the WAL sync of a batch fails (sqlite)', () => {
  for (const stop of ['SIGTERM', 'SIGKILL'] as const) {
    it(`answers the batch with 503s and stores none of it, across a ${stop} and a restart`, async () => {
      const env = await serviceEnv('sqlite')
      const token = await createToken(env, 'sync-failure')
      const failing = await spawnService({ ...env, NODE_OPTIONS: `--import ${preload}` })
      const create = (url: string, id: number) =>
        request('POST', `${url}/plants`, { token, body: { id, name: `plant ${id}`, tag: 'sync' } })

      const acknowledged = Array.from({ length: 20 }, (_, i) => 100 + i)
      for (const id of acknowledged) assert.equal((await create(failing.url, id)).status, 200)
      fs.writeFileSync(`${env.PLANT_STORE_DB}.fail-sync`, '')
      const refused = Array.from({ length: 40 }, (_, i) => 1000 + i)
      const answers = await Promise.all(refused.map((id) => create(failing.url, id)))
      for (const answer of answers) {
        assert.equal(answer.status, 503, answer.text)
        assert.deepEqual(Object.keys(answer.json).sort(), ['code', 'error', 'message'])
        assert.equal(answer.json.code, 'STORE_UNAVAILABLE')
        assert.equal(answer.headers.get('retry-after'), '5')
      }
      assert.equal((await request('GET', `${failing.url}/readyz`)).status, 503)
      assert.match(failing.output(), /the SQLite WAL could not be synced; its commit is discarded/)

      if (stop === 'SIGTERM') assert.equal(await stopService(failing), 0)
      else {
        failing.child.kill('SIGKILL')
        await failing.exited
      }
      fs.rmSync(`${env.PLANT_STORE_DB}.fail-sync`)

      const restarted = await spawnService(env)
      try {
        for (const id of acknowledged) {
          const read = await request('GET', `${restarted.url}/plants/${id}`, { token })
          assert.equal(read.text, `{"id":${id},"name":"plant ${id}","tag":"sync"}`)
        }
        for (const id of refused) {
          const read = await request('GET', `${restarted.url}/plants/${id}`, { token })
          assert.equal(read.status, 404, `plant ${id} was answered 503, yet it is stored`)
        }
        const listed = await request('GET', `${restarted.url}/plants?limit=1000`, { token })
        assert.equal(listed.json.length, acknowledged.length)
        // The store takes writes again, and the refused creates can be retried.
        assert.equal((await create(restarted.url, 1000)).status, 200)
      } finally {
        await stopService(restarted)
      }
    })
  }

  it('says in its log, without the WAL library, that the refused batch may be there after a restart', async () => {
    const env = await serviceEnv('sqlite', { SQLITE_WAL_COALESCE: 'false' })
    const token = await createToken(env, 'sync-failure')
    const failing = await spawnService({ ...env, NODE_OPTIONS: `--import ${preload}` })
    try {
      fs.writeFileSync(`${env.PLANT_STORE_DB}.fail-sync`, '')
      const answer = await request('POST', `${failing.url}/plants`, {
        token,
        body: { id: 1, name: 'refused' },
      })
      assert.equal(answer.status, 503, answer.text)
      assert.equal(answer.json.code, 'STORE_UNAVAILABLE')
      // Log lines are written at the end of the event loop's turn, which may come after the answer.
      const said =
        /its commit could not be discarded \(the wal-coalesce library, which discards it, is not loaded\): its writes may be there after a restart/
      await waitFor('the log line', () => said.test(failing.output()))
    } finally {
      await stopService(failing)
    }
  })
})
