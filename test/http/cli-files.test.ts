/** What `backup`, `export` and `import` do with the files they are given: nothing they were not asked to. */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { backupSqliteStore } from '../../src/storage/sqlite/backup.js'
import { runCli, serviceEnv, tempDir } from '../helpers.js'

/** A SQLite store with a few plants, and its environment. */
async function seededStore(): Promise<{ env: Record<string, string>; folder: string }> {
  const folder = tempDir()
  const env = await serviceEnv('sqlite')
  const seed = path.join(folder, 'seed.ndjson')
  fs.writeFileSync(seed, Array.from({ length: 100 }, (_, i) => `{"id":${i + 1},"name":"seed"}\n`).join(''))
  const imported = await runCli(['import', seed], env)
  assert.equal(imported.code, 0, imported.stderr)
  return { env, folder }
}

/** The names in `folder`: a partial copy left behind would show here. */
const names = (folder: string) => fs.readdirSync(folder).sort()

describe('backup FILE never replaces what is at FILE', () => {
  it('refuses a dangling symbolic link and an existing file, and leaves both alone', async () => {
    const { env, folder } = await seededStore()
    const link = path.join(folder, 'link.db')
    const pointee = path.join(folder, 'elsewhere', 'victim.db')
    fs.symlinkSync(pointee, link)
    const onLink = await runCli(['backup', link], env)
    assert.equal(onLink.code, 1, onLink.stderr)
    assert.equal(onLink.stderr, `plant-store: ${link} already exists; choose a new file\n`)
    assert.equal(fs.readlinkSync(link), pointee, 'the link is still there, unchanged')
    assert.equal(fs.existsSync(pointee), false, 'nothing was written through it')

    const kept = path.join(folder, 'kept.db')
    fs.writeFileSync(kept, 'precious')
    const onFile = await runCli(['backup', kept], env)
    assert.equal(onFile.code, 1)
    assert.match(onFile.stderr, /kept\.db already exists; choose a new file/)
    assert.equal(fs.readFileSync(kept, 'utf8'), 'precious')
    assert.deepEqual(names(folder), ['kept.db', 'link.db', 'seed.ndjson'])
  })

  it('fails at its last step when something appeared at FILE while it copied, and leaves it alone', async () => {
    const { env, folder } = await seededStore()
    const target = path.join(folder, 'copy.db')
    const pointee = path.join(folder, 'elsewhere.db')
    let made = false
    // After the first copy step: past any check made before the copy began.
    const copying = backupSqliteStore(env.PLANT_STORE_DB as string, target, () => {
      if (!made) fs.symlinkSync(pointee, target)
      made = true
    })
    await assert.rejects(copying, (error: NodeJS.ErrnoException) => error.code === 'EEXIST')
    assert.ok(made, 'the copy reported progress')
    assert.equal(fs.readlinkSync(target), pointee)
    assert.equal(fs.existsSync(pointee), false)
    assert.deepEqual(names(folder), ['copy.db', 'seed.ndjson'], 'no partial copy is left')
  })
})

describe('export FILE', () => {
  it('creates FILE private to its owner, and with --force refuses a symbolic link, leaving its target alone', async () => {
    const { env, folder } = await seededStore()
    const fresh = path.join(folder, 'plants.ndjson')
    const exported = await runCli(['export', fresh], env)
    assert.equal(exported.code, 0, exported.stderr)
    assert.equal(fs.statSync(fresh).mode & 0o777, 0o600)
    assert.equal(fs.readFileSync(fresh, 'utf8').split('\n').length, 101)

    const victim = path.join(folder, 'victim.txt')
    fs.writeFileSync(victim, 'precious\n')
    const link = path.join(folder, 'link.ndjson')
    fs.symlinkSync(victim, link)
    const refused = await runCli(['export', '--force', link], env)
    assert.equal(refused.code, 1)
    assert.equal(
      refused.stderr,
      `plant-store: ${link} is a symbolic link; export --force does not follow one, name the file itself\n`,
    )
    assert.equal(fs.readFileSync(victim, 'utf8'), 'precious\n')
    assert.equal(fs.readlinkSync(link), victim)

    // --force still replaces a file's contents.
    assert.equal((await runCli(['export', '--force', victim], env)).code, 0)
    assert.equal(fs.readFileSync(victim, 'utf8'), fs.readFileSync(fresh, 'utf8'))
  })
})

describe('import FILE', () => {
  it('refuses a directory before the store is opened: exit 1, a clear message, no store created', async () => {
    const folder = tempDir()
    const missing = path.join(folder, 'new', 'plants.db')
    fs.mkdirSync(path.dirname(missing))
    const env = { ...(await serviceEnv('sqlite')), PLANT_STORE_DB: missing }
    const refused = await runCli(['import', folder], env)
    assert.equal(refused.code, 1, refused.stderr)
    assert.equal(
      refused.stderr,
      `plant-store: cannot read ${folder}: it is a directory; import reads an NDJSON file, or - for standard input\n`,
    )
    assert.deepEqual(fs.readdirSync(path.dirname(missing)), [], 'no store was created')
  })

  it('reads a pipe, as a shell gives for <(command)', async () => {
    const folder = tempDir()
    const env = await serviceEnv('sqlite')
    const fifo = path.join(folder, 'plants.fifo')
    execFileSync('mkfifo', [fifo])
    const writing = fs.promises.writeFile(fifo, '{"id":1,"name":"piped"}\n')
    const imported = await runCli(['import', fifo], env)
    await writing
    assert.equal(imported.code, 0, imported.stderr)
    assert.match(imported.stderr, /imported: 1 created/)
  })
})
