/** Shell completion run for real: bash and fish with the generated scripts, ids from the store. */
import assert from 'node:assert/strict'
import { execFile, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { suiteRunsHere, cliPath, runCli, tempDir, waitFor } from '../helpers.js'
import { setupWebhooks } from './webhook-harness.js'

const run = (file: string, args: string[], env: Record<string, string>, cwd: string) =>
  new Promise<string>((resolve, reject) =>
    execFile(file, args, { env: { ...process.env, ...env }, cwd }, (error, stdout, stderr) =>
      error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout),
    ),
  )

/** A `plant-store` on PATH, as an installed one is, running this build. */
function installed(folder: string): Record<string, string> {
  const bin = path.join(folder, 'bin')
  fs.mkdirSync(bin)
  fs.writeFileSync(
    path.join(bin, 'plant-store'),
    `#!/bin/sh\nexec '${process.execPath}' '${cliPath}' "$@"\n`,
    {
      mode: 0o755,
    },
  )
  return { PATH: `${bin}:${process.env.PATH}` }
}

/** What bash offers for the words of `line` (the last one being completed), one per line. */
async function bashOffers(script: string, line: string[], env: Record<string, string>, cwd: string) {
  const words = line.map((word) => `'${word.replaceAll("'", "'\\''")}'`).join(' ')
  const probe = `source '${script}'
COMP_WORDS=(${words}); COMP_CWORD=${line.length - 1}; COMP_LINE="\${COMP_WORDS[*]}"; COMP_POINT=\${#COMP_LINE}
_plant_store; printf '%s\\n' "\${COMPREPLY[@]}"`
  return (await run('bash', ['-c', probe], env, cwd)).split('\n').filter(Boolean).sort()
}

describe('bash completion, run by bash', () => {
  it('completes commands, flags, file names with spaces, and token, subscription and delivery ids', async (t) => {
    const ctx = await setupWebhooks('sqlite', t)
    const receiver = await ctx.receiver()
    receiver.answer = () => 500
    await ctx.subscribe(receiver)
    await ctx.start()
    // A loaded machine may shed the first request (503, Retry-After): the test is about completion.
    await waitFor(
      'the plant created',
      async () => (await ctx.post('{"id":31,"name":"Fails"}')).status === 200,
    )
    const [failed] = await ctx.failed(1)
    const folder = tempDir()
    const env = { ...ctx.env, ...installed(folder) }
    const token = JSON.parse((await runCli(['tokens', 'list', '--json'], ctx.env)).stdout)[0].id as string
    const subscription = JSON.parse((await runCli(['webhooks', 'list', '--json'], ctx.env)).stdout)[0]
      .id as string
    const script = path.join(folder, 'plant-store.bash')
    fs.writeFileSync(script, (await runCli(['completion', 'bash'], {})).stdout)
    const files = path.join(folder, 'files')
    fs.mkdirSync(files)
    fs.writeFileSync(path.join(files, 'my plants.ndjson'), '')
    fs.writeFileSync(path.join(files, 'my other.ndjson'), '')

    assert.deepEqual(await bashOffers(script, ['plant-store', 'res'], env, files), ['restore'])
    assert.deepEqual(await bashOffers(script, ['plant-store', 'tokens', 'create', '--e'], env, files), [
      '--expires-in',
    ])
    assert.deepEqual(await bashOffers(script, ['plant-store', 'import', 'my'], env, files), [
      'my other.ndjson',
      'my plants.ndjson',
    ])
    assert.deepEqual(await bashOffers(script, ['plant-store', 'import', 'my\\ p'], env, files), [
      'my plants.ndjson',
    ])
    assert.deepEqual(await bashOffers(script, ['plant-store', 'tokens', 'revoke', ''], env, files), [token])
    assert.deepEqual(await bashOffers(script, ['plant-store', 'webhooks', 'test', 'sub_'], env, files), [
      subscription,
    ])
    assert.deepEqual(await bashOffers(script, ['plant-store', 'webhooks', 'retry', ''], env, files), [
      failed?.id,
    ])
    assert.deepEqual(await bashOffers(script, ['plant-store', 'webhooks', 'retry', '--'], env, files), [
      '--failed',
      '--help',
    ])
    assert.deepEqual(await bashOffers(script, ['plant-store', 'completion', ''], env, files), [
      'bash',
      'fish',
      'zsh',
    ])
    // No store there: nothing offered, and none created.
    const none = { ...env, PLANT_STORE_DB: path.join(folder, 'none', 'plants.db') }
    assert.deepEqual(await bashOffers(script, ['plant-store', 'tokens', 'revoke', ''], none, files), [])
    assert.equal(fs.existsSync(path.join(folder, 'none')), false)
  })
})

const hasFish = spawnSync('fish', ['--version']).status === 0
if (suiteRunsHere('fish completion', hasFish, 'fish', 'apt-get install fish')) {
  describe('fish completion, run by fish', () => {
    it('completes commands, subcommands, flags and token ids', async () => {
      const folder = tempDir()
      const env = { PLANT_STORE_DB: path.join(folder, 'plants.db'), ...installed(folder), HOME: folder }
      assert.equal((await runCli(['tokens', 'create', '--name', 'fish'], env)).code, 0)
      const token = JSON.parse((await runCli(['tokens', 'list', '--json'], env)).stdout)[0].id as string
      const script = path.join(folder, 'plant-store.fish')
      const generated = await runCli(['completion', 'fish'], {})
      assert.equal(generated.code, 0, generated.stderr)
      fs.writeFileSync(script, generated.stdout)
      const offers = async (line: string) =>
        (await run('fish', ['--no-config', '-c', `source '${script}'; complete -C '${line}'`], env, folder))
          .split('\n')
          .filter(Boolean)
          .map((offer) => offer.split('\t')[0])
      assert.ok((await offers('plant-store ')).includes('restore'))
      assert.deepEqual(await offers('plant-store tok'), ['tokens'])
      assert.deepEqual((await offers('plant-store tokens ')).sort(), ['create', 'list', 'revoke'])
      assert.deepEqual(await offers('plant-store tokens create --exp'), ['--expires-in'])
      assert.deepEqual(await offers('plant-store tokens revoke '), [token])
    })
  })
}
