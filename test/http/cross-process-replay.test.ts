/**
 * Two processes on one SQLite file: a create (or delete) that another process has committed but
 * not yet synced can be answered from here: a replay's 200, a conflict's 409, a delete's 404.
 * Each vouches for that commit, so it is sent only once the commit is on disk and can no longer be
 * taken back: this process commits after it and syncs the WAL first, and fails the request if that
 * sync fails. A preload delays, fails or counts each process's syncs
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

/** Starts the service on `env`'s store with its WAL syncs steered by the file `marker`. */
const spawnSteered = (env: Record<string, string>, marker: string) =>
  spawnService({ ...env, NODE_OPTIONS: `--import ${preload}`, SYNC_FAULT_FILE: marker })

/**
 * Sends `action` and resolves, to its pending answer, once a connection of the test's own sees
 * `committed` true in the file: the commit is in, its sync not yet done (the services' own reads
 * may wait for syncs).
 */
async function committedNotSynced<T>(
  file: string,
  action: () => Promise<T>,
  committed: (db: Database.Database) => boolean,
) {
  const answer = action()
  const db = new Database(file, { readonly: true })
  try {
    for (let tries = 0; tries < 500; tries++) {
      if (committed(db)) return answer
      await sleep(10)
    }
  } finally {
    db.close()
  }
  throw new Error('the commit never landed')
}

const stored = (id: number) => (db: Database.Database) =>
  db.prepare('SELECT 1 FROM plants WHERE id = ?').pluck().get(id) === 1

/** A token's first use writes its last_used_at (then at most once a minute): done before any test counts syncs. */
async function warmUp(services: SpawnedService[], token: string) {
  for (const service of services) {
    assert.equal((await request('GET', `${service.url}/plants?limit=1`, { token })).status, 200)
  }
}

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

  const createdNotSynced = (plant: { id: number; name: string; tag?: string }) =>
    committedNotSynced(env.PLANT_STORE_DB as string, () => create(first, plant), stored(plant.id))

  before(async () => {
    env = await serviceEnv('sqlite')
    token = await createToken(env, 'cross-process')
    const firstMarker = `${env.PLANT_STORE_DB}.first`
    secondMarker = `${env.PLANT_STORE_DB}.second`
    fs.writeFileSync(firstMarker, `delay:${SLOW_SYNC_MS}`)
    fs.writeFileSync(secondMarker, 'log')
    first = await spawnSteered(env, firstMarker)
    second = await spawnSteered(env, secondMarker)
    await warmUp([first, second], token)
    await sleep(SLOW_SYNC_MS + 200)
  })

  after(async () => {
    await stopService(first)
    await stopService(second)
  })

  it('answers a replay only after its own sync of the WAL', async () => {
    const body = { id: 4242, name: 'Fern', tag: 'green' }
    const syncsBefore = syncsOfSecond()
    const pending = await createdNotSynced(body)
    const replay = await create(second, body)
    assert.equal(replay.status, 200, replay.text)
    assert.deepEqual(replay.json, { name: 'Fern', tag: 'green' })
    assert.ok(syncsOfSecond() > syncsBefore, 'the replay was answered without a sync of the WAL')
    assert.equal((await pending).status, 200)
  })

  it('answers a conflict only after its own sync of the WAL', async () => {
    const syncsBefore = syncsOfSecond()
    const pending = await createdNotSynced({ id: 4343, name: 'Fern' })
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
    const pending = await createdNotSynced(body)
    const replay = await create(second, body)
    assert.equal(replay.status, 503, replay.text)
    assert.equal(replay.json.code, 'STORE_UNAVAILABLE')
    assert.equal((await pending).status, 200)
    const read = await request('GET', `${first.url}/plants/4545`, { token })
    assert.equal(read.text, '{"id":4545,"name":"Sage"}')
  })
})

describe('an answer from another process’s commit, when that process’s sync then fails (sqlite)', () => {
  let env: Record<string, string>
  let token: string
  let first: SpawnedService
  let second: SpawnedService
  let firstMarker: string
  let secondMarker: string

  before(async () => {
    env = await serviceEnv('sqlite')
    token = await createToken(env, 'cross-process')
    firstMarker = `${env.PLANT_STORE_DB}.first`
    secondMarker = `${env.PLANT_STORE_DB}.second`
    fs.writeFileSync(firstMarker, 'log')
    fs.writeFileSync(secondMarker, 'log')
    second = await spawnSteered(env, secondMarker)
  })

  after(async () => {
    await stopService(second)
  })

  /** Starts the first process afresh (a failed sync leaves it refusing writes), its syncs sound. */
  async function startFirst() {
    fs.writeFileSync(firstMarker, 'log')
    first = await spawnSteered(env, firstMarker)
    await warmUp([first, second], token)
    await sleep(200)
  }

  /** From here every sync of the first process fails, after SLOW_SYNC_MS. */
  const failFirstSyncs = () => fs.writeFileSync(firstMarker, `fail-after:${SLOW_SYNC_MS}`)

  /** What a fresh service, with no preload, reads for `id` once every other process has stopped. */
  async function afterRestart(id: number) {
    await stopService(second)
    const fresh = await spawnService(env)
    try {
      return (await request('GET', `${fresh.url}/plants/${id}`, { token })).text
    } finally {
      await stopService(fresh)
      second = await spawnSteered(env, secondMarker)
    }
  }

  it('keeps the plant a replay answered 200 for: the first process can no longer take its commit back', async () => {
    await startFirst()
    failFirstSyncs()
    const body = { id: 777, name: 'fromA' }
    const pending = await committedNotSynced(
      env.PLANT_STORE_DB as string,
      () => request('POST', `${first.url}/plants`, { token, body }),
      stored(777),
    )
    const replay = await request('POST', `${second.url}/plants`, { token, body })
    assert.equal(replay.status, 200, replay.text)
    const conflict = await request('POST', `${second.url}/plants`, {
      token,
      body: { id: 777, name: 'other' },
    })
    assert.equal(conflict.status, 409, conflict.text)
    assert.equal((await pending).status, 503)
    assert.match(first.output(), /could not be discarded \(another connection committed after it\)/)
    await stopService(first)
    assert.equal(await afterRestart(777), '{"id":777,"name":"fromA"}')
  })

  it('keeps a plant deleted that a delete answered 404 for', async () => {
    await startFirst()
    assert.equal(
      (await request('POST', `${first.url}/plants`, { token, body: { id: 888, name: 'gone' } })).status,
      200,
    )
    failFirstSyncs()
    const pending = await committedNotSynced(
      env.PLANT_STORE_DB as string,
      () => request('DELETE', `${first.url}/plants/888`, { token }),
      (db) => !stored(888)(db),
    )
    const again = await request('DELETE', `${second.url}/plants/888`, { token })
    assert.equal(again.status, 404, again.text)
    assert.equal((await pending).status, 503)
    await stopService(first)
    assert.equal(JSON.parse(await afterRestart(888)).error, 404)
  })
})
