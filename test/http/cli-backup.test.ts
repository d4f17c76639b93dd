/** `plant-store backup` while a live service writes, shell completion, and progress on a terminal. */
import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import Database from 'better-sqlite3'
import {
  skipUnless,
  runCli,
  serviceEnv,
  stopService,
  tempDir,
  testStores,
  startServiceProcess,
} from '../helpers.js'
import { request } from '../http-client.js'
import { onTerminal } from './terminal.js'

describe('backup (sqlite)', () => {
  it('copies the store while the service takes writes: integrity ok, every acknowledged plant in it', async (t) => {
    const folder = tempDir()
    const seed = path.join(folder, 'seed.ndjson')
    fs.writeFileSync(
      seed,
      Array.from({ length: 20_000 }, (_, i) => `{"id":${i + 1},"name":"seed ${i + 1}"}\n`).join(''),
    )
    const { env, token, service } = await startServiceProcess('sqlite', {
      name: 'backup-test',
      prepare: async (env) => assert.equal((await runCli(['import', seed], env)).code, 0),
    })
    t.after(() => stopService(service))

    // Writers keep creating plants before, during and after the backup.
    const acknowledged = new Set<number>()
    let next = 100_000
    let writing = true
    const writer = async () => {
      while (writing) {
        const id = next++
        const answer = await request('POST', `${service.url}/plants`, {
          token,
          body: `{"id":${id},"name":"live ${id}"}`,
        })
        assert.equal(answer.status, 200, answer.text)
        acknowledged.add(id)
      }
    }
    const writers = Array.from({ length: 4 }, writer)
    while (acknowledged.size < 200) await new Promise((resolve) => setTimeout(resolve, 10))
    const before = new Set(acknowledged)
    const target = path.join(folder, 'copy.db')
    const backup = await runCli(['backup', target], env)
    const during = acknowledged.size - before.size
    writing = false
    await Promise.all(writers)
    assert.equal(backup.code, 0, backup.stderr)
    assert.match(
      backup.stderr,
      new RegExp(`^backed up ${env.PLANT_STORE_DB} to ${target} \\([\\d,]+ bytes\\)\n$`),
    )
    t.diagnostic(`plants acknowledged while the backup ran: ${during}`)

    const copy = new Database(target, { readonly: true })
    try {
      assert.equal(copy.pragma('integrity_check', { simple: true }), 'ok')
      const ids = new Set((copy.prepare('SELECT id FROM plants').pluck().all() as number[]).map(Number))
      for (let id = 1; id <= 20_000; id++) assert.ok(ids.has(id), `seed plant ${id}`)
      for (const id of before) assert.ok(ids.has(id), `plant ${id}, acknowledged before the backup began`)
      assert.equal(copy.prepare('SELECT count(*) FROM tokens').pluck().get(), 1)
    } finally {
      copy.close()
    }
    assert.equal(fs.statSync(target).mode & 0o777, 0o600, 'private: it holds token hashes and secrets')

    const again = await runCli(['backup', target], env)
    assert.equal(again.code, 1)
    assert.match(again.stderr, /already exists; choose a new file/)
    const missing = await runCli(['backup', path.join(folder, 'x.db')], {
      PLANT_STORE_DB: path.join(folder, 'none', 'plants.db'),
    })
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /no store at .*none\/plants\.db/)
    assert.equal(fs.existsSync(path.join(folder, 'none')), false)
  })
})

if (testStores().includes('postgres')) {
  describe('backup (postgres)', () => {
    it('refuses, pointing at pg_dump', async () => {
      const env = await serviceEnv('postgres')
      const result = await runCli(['backup', path.join(tempDir(), 'x.db')], env)
      assert.equal(result.code, 1)
      assert.match(result.stderr, /for PostgreSQL use pg_dump: pg_dump --format=custom/)
    })
  })
}

describe('shell completion', () => {
  it('prints a bash script that bash can source, completing commands and options', async () => {
    const script = await runCli(['completion', 'bash'], {})
    assert.equal(script.code, 0, script.stderr)
    const file = path.join(tempDir(), 'completion.bash')
    fs.writeFileSync(file, script.stdout)
    const probe = [
      `source ${file}`,
      'complete -p plant-store',
      'COMP_WORDS=(plant-store tok); COMP_CWORD=1; _plant_store; echo "${COMPREPLY[*]}"',
      'COMP_WORDS=(plant-store webhooks ""); COMP_CWORD=2; _plant_store; echo "${COMPREPLY[*]}"',
      'COMP_WORDS=(plant-store tokens create --); COMP_CWORD=3; _plant_store; echo "${COMPREPLY[*]}"',
    ].join('\n')
    const output = await new Promise<string>((resolve, reject) =>
      execFile('bash', ['-c', probe], (error, stdout, stderr) =>
        error ? reject(new Error(stderr)) : resolve(stdout),
      ),
    )
    assert.equal(
      output,
      [
        'complete -F _plant_store plant-store',
        'tokens',
        'add list remove deliveries retry test',
        '--name --scopes --expires-in --help',
        '',
      ].join('\n'),
    )
  })

  it('prints a zsh script that registers itself with compdef, and refuses another shell', async () => {
    const script = await runCli(['completion', 'zsh'], {})
    assert.equal(script.code, 0, script.stderr)
    assert.match(script.stdout, /^#compdef plant-store\n/)
    assert.match(script.stdout, /compdef _plant_store plant-store/)
    assert.match(script.stdout, /"webhooks retry"\) choices=\(--failed --help\); kind="delivery" ;;/)
    const other = await runCli(['completion', 'tcsh'], {})
    assert.equal(other.code, 2)
    assert.match(other.stderr, /^plant-store: SHELL must be one of bash, zsh, fish, got "tcsh"\n/)
  })
})

/** The terminal's erase-line sequence shown as <clear>, so the expectations stay readable. */
const onScreen = async (args: string[], env: Record<string, string>) =>
  (await onTerminal(args, env)).replaceAll('\u001b[2K', '<clear>')

const hasScript = spawnSync('script', ['--version']).status === 0
describe(
  'progress on a terminal',
  { skip: skipUnless(hasScript, 'script(1) from util-linux', 'apt-get install util-linux') },
  () => {
    it('draws a progress line on a terminal stderr, and none when stderr is not one', async () => {
      const folder = tempDir()
      const env = { PLANT_STORE_DB: path.join(folder, 'plants.db') }
      const file = path.join(folder, 'in.ndjson')
      fs.writeFileSync(file, Array.from({ length: 30_000 }, (_, i) => `{"id":${i},"name":"p"}\n`).join(''))
      const imported = await onScreen(['import', file], env)
      assert.match(imported, /\r<clear>importing: [\d,]+ lines, \d+%/)
      assert.match(imported, /imported: 30,000 created/)
      const out = path.join(folder, 'out.ndjson')
      assert.match(await onScreen(['export', out], env), /\r<clear>exporting: 30,000 plants in [\d.]+ s/)
      assert.match(
        await onScreen(['backup', path.join(folder, 'copy.db')], env),
        /\r<clear>backing up .*: \d+ of \d+ pages, \d+%/,
      )
      assert.match(
        await onScreen(['migrate'], env),
        /migrate: opening the store and applying pending migrations/,
      )
      const fresh = await onScreen(['migrate'], { PLANT_STORE_DB: path.join(folder, 'fresh.db') })
      assert.match(fresh, /\r<clear>migrate: applying migration 4 \(webhook attempt history\)\.\.\./)
      assert.match(fresh, /\r<clear>created a new SQLite store at .*fresh\.db\r?\n/, 'on a line of its own')
      assert.match(fresh, /migrate: done in [\d.]+ s/)
      const piped = await runCli(['export', '--force', out], env)
      assert.equal(piped.stderr, `exported 30,000 plants to ${out}\n`)
    })
  },
)
