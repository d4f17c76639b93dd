/** `plant-store restore FILE`: a checked backup replaces the SQLite store, the old one kept aside. */
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { runCli, serviceEnv, spawnService, stopService, tempDir, testStores } from '../helpers.js'
import { request } from '../http-client.js'

const plants = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `{"id":${from + i},"name":"p${from + i}"}\n`).join('')

/** A store of plants 1..10 with a token, and a backup of it taken then; then plants 11..20. */
async function storeWithBackup() {
  const folder = tempDir()
  const env = { PLANT_STORE_DB: path.join(folder, 'data', 'plants.db') }
  fs.mkdirSync(path.dirname(env.PLANT_STORE_DB))
  const file = (name: string, text: string) => {
    fs.writeFileSync(path.join(folder, name), text)
    return path.join(folder, name)
  }
  assert.equal((await runCli(['import', file('first.ndjson', plants(1, 10))], env)).code, 0)
  const backup = path.join(folder, 'backup.db')
  assert.equal((await runCli(['backup', backup], env)).code, 0)
  assert.equal((await runCli(['import', file('later.ndjson', plants(11, 20))], env)).code, 0)
  return { folder, env, backup }
}

/** Writable, so that as the last connection it removes the -wal and -shm it made. */
const countPlants = (file: string) => {
  const db = new Database(file, { fileMustExist: true })
  try {
    return db.prepare('SELECT count(*) FROM plants').pluck().get()
  } finally {
    db.close()
  }
}

describe('restore (sqlite)', () => {
  it('replaces the store with the checked backup, keeps the replaced store aside, and says so', async () => {
    const { folder, env, backup } = await storeWithBackup()
    const result = await runCli(['restore', backup], env)
    assert.equal(result.code, 0, result.stderr)
    const said =
      /^restored (.+) from (.+) \([\d,]+ bytes, schema version \d+\); the replaced store is kept as (.+)\n$/.exec(
        result.stderr,
      )
    assert.ok(said, result.stderr)
    assert.equal(said[1], env.PLANT_STORE_DB)
    assert.equal(said[2], backup)
    const aside = said[3] as string
    assert.match(path.basename(aside), /^plants\.db\.before-restore-\d{4}-/)
    // The replaced store is whole in one file: its WAL was checkpointed into it.
    assert.equal(countPlants(aside), 20)
    assert.deepEqual(
      fs.readdirSync(path.dirname(env.PLANT_STORE_DB)).sort(),
      [path.basename(aside), 'plants.db'].sort(),
    )
    assert.equal(fs.statSync(env.PLANT_STORE_DB).mode & 0o777, 0o600)
    const exported = await runCli(['export'], env)
    assert.equal(exported.stdout, plants(1, 10))
    // The service starts on the restored store and serves it.
    const service = await spawnService({ ...(await serviceEnv('sqlite')), ...env })
    try {
      const token = (await runCli(['tokens', 'create', '--name', 'after'], env)).stdout.trim()
      assert.equal((await request('GET', `${service.url}/plants/10`, { token })).status, 200)
      assert.equal((await request('GET', `${service.url}/plants/11`, { token })).status, 404)
    } finally {
      assert.equal(await stopService(service), 0)
    }
    assert.ok(fs.existsSync(backup), 'the backup itself is left as it was')
    assert.equal(fs.readdirSync(folder).filter((f) => f.includes('.restore-')).length, 0)
  })

  it('refuses while a service holds the store, and changes nothing', async () => {
    const { env, backup } = await storeWithBackup()
    const service = await spawnService({ ...(await serviceEnv('sqlite')), ...env })
    let stopped = false
    try {
      const refused = await runCli(['restore', backup], env)
      assert.equal(refused.code, 1)
      assert.match(
        refused.stderr,
        /^plant-store: .*plants\.db: the store is in use \(a running service or another command has it open\); stop the service first/,
      )
      assert.equal(
        fs.readdirSync(path.dirname(env.PLANT_STORE_DB)).filter((f) => f.includes('before-restore')).length,
        0,
      )
      assert.equal(await stopService(service), 0)
      stopped = true
    } finally {
      if (!stopped) await stopService(service)
    }
    assert.equal(countPlants(env.PLANT_STORE_DB), 20)
    assert.equal((await runCli(['restore', backup], env)).code, 0)
  })

  it('refuses a file that is not a sound backup of a schema this build knows', async () => {
    const { folder, env, backup } = await storeWithBackup()
    const garbage = path.join(folder, 'garbage.db')
    fs.writeFileSync(garbage, 'not a database at all, just text '.repeat(200))
    const newer = path.join(folder, 'newer.db')
    fs.copyFileSync(backup, newer)
    const db = new Database(newer)
    db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)").run()
    db.close()
    const torn = path.join(folder, 'torn.db')
    const bytes = fs.readFileSync(backup)
    // The second page onwards overwritten: the header still says SQLite, the b-trees do not.
    bytes.fill(0x55, 4096, Math.min(bytes.length, 4096 * 3))
    fs.writeFileSync(torn, bytes)
    for (const [file, reason] of [
      [garbage, /garbage\.db: (not a SQLite store|cannot open the backup): file is not a database/],
      [newer, /newer\.db: schema version 999 is newer than this build knows \(\d+\)/],
      [torn, /torn\.db: (PRAGMA integrity_check says|not a SQLite store: database disk image is malformed)/],
      [path.join(folder, 'missing.db'), /missing\.db: cannot open the backup/],
    ] as const) {
      const result = await runCli(['restore', file], env)
      assert.equal(result.code, 1, result.stderr)
      assert.match(result.stderr, reason)
    }
    assert.equal(countPlants(env.PLANT_STORE_DB), 20, 'the store is untouched')
    assert.equal(fs.readdirSync(path.dirname(env.PLANT_STORE_DB)).length, 1)
  })
})

if (testStores().includes('postgres')) {
  describe('restore (postgres)', () => {
    it('says it is for SQLite and points at pg_restore', async () => {
      const result = await runCli(['restore', path.join(tempDir(), 'x.dump')], await serviceEnv('postgres'))
      assert.equal(result.code, 1)
      assert.match(
        result.stderr,
        /^plant-store: restore replaces a SQLite store; for PostgreSQL use pg_restore/,
      )
    })
  })
}
