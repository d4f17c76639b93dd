/**
 * The write contract when the disk fails a sync (EIO): the batch is answered 503 (not
 * acknowledged: it may or may not be stored, and retrying is safe), the store takes no more
 * writes, /readyz says 503 and one fatal log line says to restart; what was acknowledged before
 * is kept. An LD_PRELOAD shim (test/fixtures/disk-fault.c) makes SQLite's own fsync of the store
 * fail; the service is the real one, on a real file.
 */
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { describe, it } from 'node:test'
import { spawnService, stopService, waitFor, startServiceProcess } from '../helpers.js'
import { request } from '../http-client.js'
import { diskFaultEnv } from '../shim.js'

describe('writes when the disk fails a sync (sqlite)', () => {
  for (const stop of ['SIGTERM', 'SIGKILL'] as const) {
    it(`answers 503, takes no more writes, and keeps what it acknowledged across a ${stop}`, async () => {
      const {
        env,
        token,
        service: failing,
      } = await startServiceProcess('sqlite', {
        name: 'sync-failure',
        serveEnv: (env) => diskFaultEnv(env, `${env.PLANT_STORE_DB}.fail-sync`),
      })
      const marker = `${env.PLANT_STORE_DB}.fail-sync`
      const create = (url: string, id: number) =>
        request('POST', `${url}/plants`, { token, body: { id, name: `plant ${id}`, tag: 'sync' } })

      const acknowledged = Array.from({ length: 20 }, (_, i) => 100 + i)
      for (const id of acknowledged) assert.equal((await create(failing.url, id)).status, 200)
      fs.writeFileSync(marker, '')
      const refused = Array.from({ length: 40 }, (_, i) => 1000 + i)
      const answers = await Promise.all(refused.map((id) => create(failing.url, id)))
      fs.rmSync(marker)
      for (const answer of answers) {
        assert.equal(answer.status, 503, answer.text)
        assert.deepEqual(Object.keys(answer.json).sort(), ['code', 'error', 'message'])
        assert.equal(answer.json.code, 'STORE_UNAVAILABLE')
        assert.equal(answer.headers.get('retry-after'), '5')
      }
      // The disk answers again, yet the store stays refused: a failed sync may have lost pages.
      assert.equal((await create(failing.url, 5000)).status, 503)
      assert.equal((await request('DELETE', `${failing.url}/plants/100`, { token })).status, 503)
      assert.equal((await request('GET', `${failing.url}/readyz`)).status, 503)
      assert.equal((await request('GET', `${failing.url}/plants/100`, { token })).status, 200, 'reads go on')
      const fatal = failing
        .output()
        .split('\n')
        .filter((line) => line.includes('"level":"fatal"'))
      assert.equal(fatal.length, 1, failing.output())
      assert.match(fatal[0] as string, /the store takes no more writes: restart the service/)

      if (stop === 'SIGTERM') assert.equal(await stopService(failing), 0)
      else {
        failing.child.kill('SIGKILL')
        await failing.exited
      }

      const restarted = await spawnService(env)
      try {
        for (const id of acknowledged) {
          const read = await request('GET', `${restarted.url}/plants/${id}`, { token })
          assert.equal(read.text, `{"id":${id},"name":"plant ${id}","tag":"sync"}`)
        }
        // Each refused create may or may not be stored; retried, each is acknowledged exactly once.
        for (const id of refused) assert.equal((await create(restarted.url, id)).status, 200)
        const listed = await request('GET', `${restarted.url}/plants?limit=1000`, { token })
        assert.equal(listed.json.length, acknowledged.length + refused.length)
      } finally {
        await stopService(restarted)
      }
    })
  }

  it('under --workers, the worker whose sync failed answers until its replacement listens, then stops', async () => {
    const {
      env,
      token,
      service: cluster,
    } = await startServiceProcess('sqlite', {
      name: 'sync-failure',
      serveEnv: (env) => diskFaultEnv(env, `${env.PLANT_STORE_DB}.fail-sync`),
      args: ['--workers', '2'],
    })
    const marker = `${env.PLANT_STORE_DB}.fail-sync`
    const create = (id: number) =>
      request('POST', `${cluster.url}/plants`, { token, body: { id, name: `plant ${id}` } })
    try {
      await waitFor('the cluster to be ready', () => /cluster ready/.test(cluster.output()))
      // A loaded machine may shed the first requests (503 OVERLOADED); they are tried again.
      await waitFor('a first create', async () => (await create(1)).status === 200)
      fs.writeFileSync(marker, '')
      await waitFor(
        'a worker whose store failed',
        async () => (await create(2)).status === 503 && /takes no more writes/.test(cluster.output()),
      )
      fs.rmSync(marker)
      await waitFor('the worker to be replaced', () =>
        /"msg":"replaced worker stopped"/.test(cluster.output()),
      )
      assert.match(cluster.output(), /"msg":"worker's store failed; replacing it"/)
      assert.match(
        cluster.output(),
        /the store takes no more writes: this worker answers until the primary has started its replacement/,
      )
      assert.doesNotMatch(cluster.output(), /"msg":"worker died; replacing it"/)
      await waitFor('a worker that takes writes again', async () => (await create(3)).status === 200)
      assert.equal((await request('GET', `${cluster.url}/plants/1`, { token })).status, 200)
    } finally {
      await stopService(cluster)
    }
  })
})
