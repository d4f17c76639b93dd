/**
 * A SQLite store the service cannot write: a file it may only read, a full disk, files deleted
 * under it. None of these is a bug, so none is a 500; and a 200 is never sent for a create that
 * is not in the store at PLANT_STORE_DB.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import {
  cliPath,
  runCli,
  serviceEnv,
  startService,
  stopService,
  type TestService,
  startServiceProcess,
} from '../helpers.js'
import { request } from '../http-client.js'
import { diskFaultEnv } from '../shim.js'

const create = (service: TestService, token: string, id: number) =>
  request('POST', `${service.url}/plants`, { token, body: { id, name: `plant ${id}` } })

describe('SQLite store in trouble', () => {
  it('refuses to start on a store file it may read but not write', async () => {
    const env = await serviceEnv('sqlite')
    const file = env.PLANT_STORE_DB as string
    assert.equal((await runCli(['migrate'], env)).code, 0)
    // As root the file's mode binds nobody but other users: start the service as one.
    const asRoot = process.getuid?.() === 0
    fs.chmodSync(path.dirname(file), 0o777)
    for (const suffix of ['', '-wal', '-shm']) {
      if (fs.existsSync(file + suffix)) fs.chmodSync(file + suffix, asRoot ? 0o644 : 0o444)
    }
    const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [cliPath, 'serve'],
        {
          env: { ...process.env, ...env, HOME: '/tmp' },
          timeout: 20_000,
          ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
        },
        (error, _stdout, stderr) => resolve({ code: error ? (error.code as number) : 0, stderr }),
      )
    })
    assert.equal(result.code, 1, result.stderr)
    assert.match(result.stderr, /PLANT_STORE_DB: cannot open the SQLite store/)
    assert.match(result.stderr, /is not writable by this process/)
  })

  it('answers 503 with Retry-After when the disk is full, says so on /readyz, and recovers', async () => {
    const { env, token, service } = await startServiceProcess('sqlite', {
      env: { WEBHOOK_WORKER: 'false' },
      name: 'full disk',
      serveEnv: (env) => diskFaultEnv(env, `${env.PLANT_STORE_DB}.disk-fault`),
    })
    const marker = `${env.PLANT_STORE_DB}.disk-fault`
    const post = (id: number) =>
      request('POST', `${service.url}/plants`, { token, body: { id, name: `plant ${id}` } })
    try {
      assert.equal((await post(1)).status, 200)
      // Every write to the store's files fails with ENOSPC, as on a full disk.
      fs.writeFileSync(marker, 'enospc')
      const full = await post(2)
      assert.equal(full.status, 503, full.text)
      assert.equal(full.headers.get('retry-after'), '5')
      assert.equal(full.json.code, 'STORE_UNAVAILABLE')
      const ready = await request('GET', `${service.url}/readyz`)
      assert.equal(ready.status, 503, ready.text)
      assert.match(ready.json.message, /could not write just now/)
      assert.equal((await request('GET', `${service.url}/plants/1`, { token })).status, 200, 'reads go on')

      fs.rmSync(marker)
      assert.equal((await post(5000)).status, 200)
      assert.equal((await request('GET', `${service.url}/readyz`)).status, 200)
      const lost = await request('GET', `${service.url}/plants/2`, { token })
      assert.equal(lost.status, 404, 'the create that was refused stored nothing')
    } finally {
      await stopService(service)
    }
  })

  for (const [how, move] of [
    ['deleted', (file: string) => fs.rmSync(file)],
    ['renamed away', (file: string) => fs.renameSync(file, `${file}.moved`)],
    // A copy put in its place is not the file the writer holds, so writes would miss it too.
    [
      'replaced by a copy',
      (file: string) => {
        fs.copyFileSync(file, `${file}.copy`)
        fs.renameSync(`${file}.copy`, file)
      },
    ],
  ] as const) {
    it(`refuses writes once the store files are ${how} under it, rather than acknowledge them`, async (t) => {
      const service = await startService('sqlite', { WEBHOOK_WORKER: 'false' })
      t.after(() => service.close())
      const token = await service.token()
      assert.equal((await create(service, token, 1)).status, 200)
      assert.equal((await request('GET', `${service.url}/readyz`)).status, 200)
      const file = service.env.PLANT_STORE_DB as string
      for (const suffix of ['', '-wal', '-shm']) move(file + suffix)

      const ready = await request('GET', `${service.url}/readyz`)
      assert.equal(ready.status, 503, ready.text)
      for (const id of [2, 3]) {
        const response = await create(service, token, id)
        assert.equal(response.status, 503, response.text)
        assert.equal(response.headers.get('retry-after'), '5')
      }
      assert.equal((await request('GET', `${service.url}/readyz`)).status, 503)
    })
  }

  // The files SQLite commits to stay where a restart finds them in these two cases (the WAL is at
  // its path): a write answered 503 must not be among what it finds.
  for (const [how, move] of [
    ['its shared memory deleted', (file: string) => fs.rmSync(`${file}-shm`)],
    [
      'its database file replaced by a copy',
      (file: string) => {
        fs.copyFileSync(file, `${file}.copy`)
        fs.renameSync(`${file}.copy`, file)
      },
    ],
  ] as const) {
    it(`stores nothing it answers 503 for once the store has ${how}`, async () => {
      const service = await startService('sqlite', { WEBHOOK_WORKER: 'false' })
      const file = service.env.PLANT_STORE_DB as string
      const token = await service.token()
      try {
        assert.equal((await create(service, token, 1)).status, 200)
        move(file)
        assert.equal((await request('DELETE', `${service.url}/plants/1`, { token })).status, 503)
        assert.equal((await create(service, token, 2)).status, 503)
      } finally {
        await service.close()
      }
      const restarted = await startService('sqlite', { WEBHOOK_WORKER: 'false', PLANT_STORE_DB: file })
      try {
        const again = await restarted.token()
        assert.equal((await request('GET', `${restarted.url}/plants/1`, { token: again })).status, 200)
        assert.equal((await request('GET', `${restarted.url}/plants/2`, { token: again })).status, 404)
      } finally {
        await restarted.close()
      }
    })
  }
})
