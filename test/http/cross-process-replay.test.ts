/**
 * Two processes on one SQLite file: a create that another process has committed but not yet
 * synced can be replayed (200) or conflict (409) here. Either answer vouches for that plant, so it
 * may be sent only once the plant is on disk: this process syncs the WAL first, and fails the
 * request if that sync fails. A preload delays the first process's sync and watches the second's
 * (test/fixtures/fail-wal-sync.ts); both are the real service on a real file.
 */
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, describe, it } from 'node:test'
import { pathToFileURL } from 'node:url'
import {
  createToken,
  projectRoot,
  serviceEnv,
  spawnService,
  stopService,
  type SpawnedService,
} from '../helpers.js'
import { request } from '../http-client.js'

const preload = pathToFileURL(path.join(projectRoot, 'dist/test/fixtures/fail-wal-sync.js')).href

/** How long the first process's sync of each commit takes. */
const SLOW_SYNC_MS = 1500

describe('POST /plants answered from another process’s commit not yet synced (sqlite)', () => {
  let env: Record<string, string>
  let token: string
  let first: SpawnedService
  let second: SpawnedService
  let secondMarker: string

  const create = (service: SpawnedService, body: object) =>
    request('POST', `${service.url}/plants`, { token, body })
  const syncsOfSecond = () =>
    fs.existsSync(`${secondMarker}.log`)
      ? fs.readFileSync(`${secondMarker}.log`, 'utf8').split('\n').length - 1
      : 0

  /**
   * Creates `body` in the first process and resolves once the second can read it (committed, not
   * synced). A sync of the second process counted after this began covers that commit.
   */
  async function committedNotSynced(body: { id: number; name: string; tag?: string }) {
    const answer = create(first, body)
    // Read from the file by a connection of the test's own: the services' reads may wait for syncs.
    const db = new Database(env.PLANT_STORE_DB as string, { readonly: true })
    try {
      const stored = db.prepare('SELECT 1 FROM plants WHERE id = ?').pluck()
      for (let tries = 0; tries < 500; tries++) {
        if (stored.get(body.id) === 1) return answer
        await sleep(10)
      }
    } finally {
      db.close()
    }
    throw new Error(`plant ${body.id} was never committed`)
  }

  before(async () => {
    env = await serviceEnv('sqlite')
    token = await createToken(env, 'cross-process')
    const firstMarker = `${env.PLANT_STORE_DB}.first`
    secondMarker = `${env.PLANT_STORE_DB}.second`
    fs.writeFileSync(firstMarker, `delay:${SLOW_SYNC_MS}`)
    fs.writeFileSync(secondMarker, 'log')
    first = await spawnService({ ...env, NODE_OPTIONS: `--import ${preload}`, SYNC_FAULT_FILE: firstMarker })
    second = await spawnService({
      ...env,
      NODE_OPTIONS: `--import ${preload}`,
      SYNC_FAULT_FILE: secondMarker,
    })
    // A token's first use writes its last_used_at (then at most once a minute), and that write
    // syncs: done here, so that the syncs the tests count are the creates' own.
    for (const service of [first, second]) {
      assert.equal((await request('GET', `${service.url}/plants?limit=1`, { token })).status, 200)
    }
    await sleep(SLOW_SYNC_MS + 200)
  })

  after(async () => {
    await stopService(first)
    await stopService(second)
  })

  it('answers a replay only after its own sync of the WAL', async () => {
    const body = { id: 4242, name: 'Fern', tag: 'green' }
    const syncsBefore = syncsOfSecond()
    const pending = await committedNotSynced(body)
    const replay = await create(second, body)
    assert.equal(replay.status, 200, replay.text)
    assert.deepEqual(replay.json, { name: 'Fern', tag: 'green' })
    assert.ok(syncsOfSecond() > syncsBefore, 'the replay was answered without a sync of the WAL')
    assert.equal((await pending).status, 200)
  })

  it('answers a conflict only after its own sync of the WAL', async () => {
    const syncsBefore = syncsOfSecond()
    const pending = await committedNotSynced({ id: 4343, name: 'Fern' })
    const conflict = await create(second, { id: 4343, name: 'Moss' })
    assert.equal(conflict.status, 409, conflict.text)
    assert.ok(syncsOfSecond() > syncsBefore, 'the conflict was answered without a sync of the WAL')
    assert.equal((await pending).status, 200)
  })

  it('makes no sync for a replay of a plant already on disk', async () => {
    const body = { id: 4444, name: 'Ivy' }
    assert.equal((await create(first, body)).status, 200)
    // The first replay may still sync (the second process has not synced since that commit).
    assert.equal((await create(second, body)).status, 200)
    const syncsBefore = syncsOfSecond()
    assert.equal((await create(second, body)).status, 200)
    assert.equal(syncsOfSecond(), syncsBefore)
  })

  it('answers 503, not 200, when that sync fails, and the plant is stored once the first process’s sync succeeds', async () => {
    const body = { id: 4545, name: 'Sage' }
    // From here every sync of the second process fails: whichever of its syncs would cover the
    // first process's commit, the replay cannot be answered 200.
    fs.writeFileSync(secondMarker, '')
    const pending = await committedNotSynced(body)
    const replay = await create(second, body)
    assert.equal(replay.status, 503, replay.text)
    assert.equal(replay.json.code, 'STORE_UNAVAILABLE')
    assert.equal((await pending).status, 200)
    const read = await request('GET', `${first.url}/plants/4545`, { token })
    assert.equal(read.text, '{"id":4545,"name":"Sage"}')
  })
})
