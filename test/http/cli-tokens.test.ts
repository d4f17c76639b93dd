import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { spawn } from 'node:child_process'
import { after, before, describe, it } from 'node:test'
import Database from 'better-sqlite3'
import { hashToken } from '../../src/auth/token-format.js'
import {
  cliPath,
  projectRoot,
  runCli,
  type SpawnedService,
  serviceEnv,
  spawnService,
  tempDir,
  testStores,
} from '../helpers.js'
import { pgAdmin } from '../pg-admin.js'
import { request } from '../http-client.js'

for (const store of testStores()) {
  describe(`plant-store tokens (${store})`, () => {
    let env: Record<string, string>
    let service: SpawnedService
    before(async () => {
      env = await serviceEnv(store)
      service = await spawnService(env)
    })
    after(async () => {
      service.child.kill('SIGTERM')
      await service.exited
    })

    it('create prints only a pst_ token of 32+ base62 characters, which works at once', async () => {
      const result = await runCli(['tokens', 'create', '--name', 'ci'], env)
      assert.equal(result.code, 0, result.stderr)
      assert.match(result.stdout, /^pst_[0-9A-Za-z]{32,}\n$/)
      const token = result.stdout.trim()
      assert.equal(
        (await request('POST', `${service.url}/plants`, { token, body: { id: 1, name: 'x' } })).status,
        200,
      )
      assert.equal((await request('GET', `${service.url}/plants/1`, { token })).status, 200)
    })

    it('list --json shows name, id, scopes, dates and never the secret or its hash', async () => {
      const token = (
        await runCli(['tokens', 'create', '--name', 'listed', '--expires-in', '30d'], env)
      ).stdout.trim()
      const result = await runCli(['tokens', 'list', '--json'], env)
      assert.equal(result.code, 0, result.stderr)
      assert.ok(!result.stdout.includes(token))
      assert.ok(!result.stdout.includes(hashToken(token)))
      const listed = JSON.parse(result.stdout).find((t: { name: string }) => t.name === 'listed')
      assert.match(listed.id, /^tok_/)
      assert.deepEqual(listed.scopes, ['plants:read', 'plants:write'])
      assert.ok(Date.parse(listed.created))
      const days = (Date.parse(listed.expires) - Date.now()) / 86_400_000
      assert.ok(days > 29.9 && days <= 30, String(days))
      // Counted from the creation time itself, to the millisecond.
      assert.equal(Date.parse(listed.expires) - Date.parse(listed.created), 30 * 86_400_000)
      assert.ok('lastUsed' in listed)
      const human = await runCli(['tokens', 'list'], env)
      assert.match(human.stdout, /listed/)
      assert.ok(!human.stdout.includes(token))
    })

    it('records last use', async () => {
      const token = (await runCli(['tokens', 'create', '--name', 'used'], env)).stdout.trim()
      await request('GET', `${service.url}/plants/1`, { token })
      const listed = JSON.parse((await runCli(['tokens', 'list', '--json'], env)).stdout).find(
        (t: { name: string }) => t.name === 'used',
      )
      assert.ok(Date.parse(listed.lastUsed))
    })

    it('--scopes limits what a token may do', async () => {
      const token = (
        await runCli(['tokens', 'create', '--name', 'reader', '--scopes', 'plants:read'], env)
      ).stdout.trim()
      assert.equal((await request('GET', `${service.url}/plants/1`, { token })).status, 200)
      assert.equal(
        (await request('POST', `${service.url}/plants`, { token, body: { id: 2, name: 'x' } })).status,
        403,
      )
    })

    it('revoke stops the token on the running server within a second', async () => {
      const token = (await runCli(['tokens', 'create', '--name', 'revoked'], env)).stdout.trim()
      assert.equal((await request('GET', `${service.url}/plants/1`, { token })).status, 200)
      const id = JSON.parse((await runCli(['tokens', 'list', '--json'], env)).stdout).find(
        (t: { name: string }) => t.name === 'revoked',
      ).id
      const revoked = await runCli(['tokens', 'revoke', id], env)
      assert.equal(revoked.code, 0, revoked.stderr)
      await new Promise((resolve) => setTimeout(resolve, 1050))
      assert.equal((await request('GET', `${service.url}/plants/1`, { token })).status, 401)
      assert.equal((await runCli(['tokens', 'revoke', id], env)).code, 1)
      assert.equal((await runCli(['tokens', 'revoke', 'tok_nope'], env)).code, 1)
    })

    for (const args of [
      ['tokens', 'create'],
      ['tokens', 'create', '--name', 'x', '--scopes', 'plants:admin'],
      ['tokens', 'create', '--name', 'x', '--expires-in', 'soon'],
      ['tokens', 'create', '--name', 'x', '--expires-in', '100000000d'],
      ['tokens', 'create', '--name', 'x', '--expires-in', '9999999999999999999999d'],
      ['tokens', 'create', '--name', 'x', '--expires-in', '36501d'],
      ['tokens', 'revoke'],
      ['tokens', 'bogus'],
      ['tokens', 'create', '--name', 'a\nb'],
      ['tokens', 'create', '--name', 'x'.repeat(101)],
      ['bogus'],
      [],
    ]) {
      it(`rejects "${args.join(' ').slice(0, 40)}" with usage and exit 2`, async () => {
        const result = await runCli(args, env)
        assert.equal(result.code, 2)
        assert.match(result.stderr, /plant-store/)
        assert.equal(result.stdout, '')
      })
    }

    it('counts --name in characters: 100 emoji are a name, 101 are not', async () => {
      const hundred = await runCli(['tokens', 'create', '--name', '🌵'.repeat(100)], env)
      assert.equal(hundred.code, 0, hundred.stderr)
      const listed = JSON.parse((await runCli(['tokens', 'list', '--json'], env)).stdout) as {
        name: string
      }[]
      assert.ok(listed.some((token) => token.name === '🌵'.repeat(100)))
      const more = await runCli(['tokens', 'create', '--name', '🌵'.repeat(101)], env)
      assert.equal(more.code, 2)
      assert.match(more.stderr, /--name must be at most 100 characters/)
    })

    it('migrate succeeds and is idempotent', async () => {
      assert.equal((await runCli(['migrate'], env)).code, 0)
      assert.equal((await runCli(['migrate'], env)).code, 0)
    })

    it('refuses a schema a newer build migrated (as after a rolled-back deploy), then accepts it again', async () => {
      const record = async (statement: string) => {
        if (store === 'sqlite') {
          const db = new Database(env.PLANT_STORE_DB as string)
          try {
            db.prepare(statement).run()
          } finally {
            db.close()
          }
        } else {
          const sql = pgAdmin(env.DATABASE_URL as string)
          try {
            await sql.unsafe(statement)
          } finally {
            await sql.end()
          }
        }
      }
      const appliedAt = store === 'sqlite' ? '0' : 'now()'
      await record(
        `INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'from a newer build', ${appliedAt})`,
      )
      try {
        for (const command of [['migrate'], ['tokens', 'list']]) {
          const result = await runCli(command, env)
          assert.equal(result.code, 1, result.stderr)
          assert.match(result.stderr, /schema is at version 99, newer than this build knows \(\d+\)/)
          assert.doesNotMatch(result.stderr, /\n[ \t]+at /, 'no stack trace')
        }
      } finally {
        await record('DELETE FROM schema_migrations WHERE version = 99')
      }
      assert.equal((await runCli(['migrate'], env)).code, 0)
    })
  })
}

/** Runs the CLI with its standard output on `stdout` (a file descriptor, or a pipe closed at once). */
function runWithStdout(args: string[], env: Record<string, string>, stdout: number | 'closed') {
  return new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [cliPath, ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', stdout === 'closed' ? 'pipe' : stdout, 'pipe'],
    })
    if (stdout === 'closed') child.stdout?.destroy()
    let stderr = ''
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('close', (code) => resolve({ code, stderr }))
  })
}

describe('plant-store command line', () => {
  it('never leaves a token or a subscription whose secret could not be printed', async () => {
    const env = await serviceEnv('sqlite')
    const full = fs.openSync('/dev/full', 'w')
    try {
      const token = await runWithStdout(['tokens', 'create', '--name', 'lost'], env, full)
      assert.equal(token.code, 1, token.stderr)
      assert.match(
        token.stderr,
        /^created a new SQLite store at .+\nplant-store: could not write the token to standard output \(ENOSPC\); token tok_\w+ is revoked/,
      )
      const hook = await runWithStdout(['webhooks', 'add', 'http://example.test/hook'], env, full)
      assert.equal(hook.code, 1, hook.stderr)
      assert.match(
        hook.stderr,
        /could not write the signing secret to standard output \(ENOSPC\); subscription sub_\w+ is removed/,
      )
      const listed = await runWithStdout(['tokens', 'list', '--json'], env, full)
      assert.equal(listed.code, 1)
      assert.equal(listed.stderr, 'plant-store: could not write to standard output: ENOSPC\n')
    } finally {
      fs.closeSync(full)
    }
    const tokens = JSON.parse((await runCli(['tokens', 'list', '--json'], env)).stdout) as {
      status: string
    }[]
    assert.deepEqual(
      tokens.map((t) => t.status),
      ['revoked'],
    )
    assert.equal((await runCli(['webhooks', 'list', '--json'], env)).stdout.trim(), '[]')
  })

  it('stops quietly when the reader of its output has gone (| head)', async () => {
    const env = await serviceEnv('sqlite')
    assert.equal((await runCli(['migrate'], env)).code, 0, 'the store the listings read')
    for (const args of [['help'], ['tokens', 'list'], ['webhooks', 'deliveries', '--json']]) {
      const result = await runWithStdout(args, env, 'closed')
      assert.equal(result.code, 0, result.stderr)
      assert.equal(result.stderr, '', args.join(' '))
    }
  })

  it('checks the command line before the store: exit 2, and no store file made', async () => {
    const folder = tempDir()
    const unopenable: Record<string, string>[] = [
      { PLANT_STORE_DB: path.join(folder, 'fresh', 'plants.db') },
      { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/nowhere' },
    ]
    for (const storeEnv of unopenable) {
      for (const args of [
        ['tokens', 'frobnicate'],
        ['tokens', 'create', '--bogus'],
        ['tokens', 'list', 'extra'],
        ['webhooks', 'deliveries', '--limit', '0'],
        ['serve', '--workers', '0'],
        ['migrate', 'now'],
      ]) {
        const result = await runCli(args, { ...storeEnv, PORT: '0' })
        assert.equal(result.code, 2, `${args.join(' ')} with ${Object.keys(storeEnv)[0]}: ${result.stderr}`)
      }
    }
    assert.equal(fs.existsSync(path.join(folder, 'fresh')), false, 'no store was created')
  })

  it('reads no SQLite store that is not there: exit 1 naming the path, and no store file made', async () => {
    const missing = path.join(tempDir(), 'typo', 'plants.db')
    for (const args of [
      ['tokens', 'list'],
      ['tokens', 'revoke', 'tok_x'],
      ['webhooks', 'list'],
      ['webhooks', 'deliveries'],
      ['webhooks', 'remove', 'sub_x'],
    ]) {
      const result = await runCli(args, { PLANT_STORE_DB: missing })
      assert.equal(result.code, 1, `${args.join(' ')}: ${result.stderr}`)
      assert.equal(result.stderr, `plant-store: no store at ${missing} (PLANT_STORE_DB); check the path\n`)
      assert.equal(result.stdout, '')
    }
    assert.equal(fs.existsSync(path.dirname(missing)), false, 'no store was created')
    // What adds something makes the store, as on a first run.
    assert.equal((await runCli(['tokens', 'create', '--name', 'first'], { PLANT_STORE_DB: missing })).code, 0)
    assert.equal((await runCli(['tokens', 'list'], { PLANT_STORE_DB: missing })).code, 0)
  })

  it('describes the command asked about, its options and environment, for --help, -h or help COMMAND', async () => {
    const folder = tempDir()
    const env = { PLANT_STORE_DB: path.join(folder, 'fresh', 'plants.db'), PORT: '0' }
    for (const [args, heading, detail] of [
      [['--help'], /^Usage:\n {2}plant-store serve/, /plant-store import FILE/],
      [['help'], /^Usage:\n {2}plant-store serve/, /plant-store --version/],
      [
        ['tokens', 'create', '--help'],
        /^Usage: plant-store tokens create --name NAME/,
        /--expires-in DURATION +lifetime/,
      ],
      [
        ['help', 'tokens', 'create'],
        /^Usage: plant-store tokens create --name NAME/,
        /PLANT_STORE_DB +SQLite store file/,
      ],
      [['tokens', '-h'], /^Usage: plant-store tokens create/, /Usage: plant-store tokens revoke ID/],
      [
        ['webhooks', 'deliveries', '--help'],
        /^Usage: plant-store webhooks deliveries/,
        /--attempts N +attempts shown/,
      ],
      [['serve', '--help'], /^Usage: plant-store serve/, /WEBHOOK_POLL_MS +how often/],
      [['migrate', '--help'], /^Usage: plant-store migrate/, /DATABASE_URL +postgres:/],
      [['backup', '--help'], /^Usage: plant-store backup FILE/, /pg_dump/],
    ] as const) {
      const result = await runCli([...args], env)
      assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`)
      assert.match(result.stdout, heading)
      assert.match(result.stdout, detail)
      assert.equal(result.stderr, '')
    }
    const unknown = await runCli(['help', 'frobnicate'], env)
    assert.equal(unknown.code, 2)
    assert.match(unknown.stderr, /no command "frobnicate" to describe/)
    assert.equal(fs.existsSync(path.join(folder, 'fresh')), false, 'no store was created')
  })

  it('prints the package version for --version and exits 0', async () => {
    const { version } = JSON.parse(fs.readFileSync(path.join(projectRoot, 'package.json'), 'utf8')) as {
      version: string
    }
    const result = await runCli(['--version'], {})
    assert.equal(result.code, 0, result.stderr)
    assert.equal(result.stdout, `${version}\n`)
  })

  it('says on stderr, with the absolute path, when a command creates the store, and only then', async () => {
    const folder = tempDir()
    const relative = path.relative(process.cwd(), path.join(folder, 'new', 'plants.db'))
    const env = { PLANT_STORE_DB: relative }
    const first = await runCli(['tokens', 'create', '--name', 'first'], env)
    assert.equal(first.code, 0, first.stderr)
    assert.match(
      first.stderr,
      new RegExp(`^created a new SQLite store at ${path.join(folder, 'new', 'plants.db')}\n`),
    )
    const second = await runCli(['tokens', 'create', '--name', 'second'], env)
    assert.equal(second.code, 0, second.stderr)
    assert.doesNotMatch(second.stderr, /created a new/)
  })
})
