/** The CLI as a person reads it: suggestions, plurals, one error style, line order, width, colour. */
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { suiteRunsHere, runCli, tempDir } from '../helpers.js'
import { onTerminal } from './terminal.js'

/** What a terminal shows, its line ends as a file has them. */
const onScreen = async (args: string[], env: Record<string, string>) =>
  (await onTerminal(args, env)).replaceAll('\r\n', '\n')

// eslint-disable-next-line no-control-regex -- the escape sequences are what is looked for
const SGR = /\u001b\[[\d;]*m/g

describe('the CLI for a person', () => {
  it('suggests the command or option meant by a typo, exit 2', async () => {
    for (const [args, expected] of [
      [['tokns', 'list'], /^plant-store: unknown command "tokns" \(did you mean "tokens"\?\)\n/],
      [
        ['webhooks', 'delivries'],
        /^plant-store: unknown command "delivries" \(did you mean "deliveries"\?\)\n/,
      ],
      [
        ['tokens', 'create', '--nmae', 'x'],
        /^plant-store: unknown option "--nmae" \(did you mean "--name"\?\)\n/,
      ],
      [
        ['webhooks', 'deliveries', '--limt', '3'],
        /^plant-store: unknown option "--limt" \(did you mean "--limit"\?\)\n/,
      ],
    ] as const) {
      const result = await runCli([...args], { PLANT_STORE_DB: path.join(tempDir(), 'none.db') })
      assert.equal(result.code, 2, args.join(' '))
      assert.match(result.stderr, expected)
      assert.equal(result.stdout, '')
    }
  })

  it('writes every error in one style: "plant-store: " and one line, lower case, no full stop', async () => {
    const folder = tempDir()
    const env = { PLANT_STORE_DB: path.join(folder, 'plants.db') }
    for (const [args, code] of [
      [['bogus'], 2],
      [['tokens', 'create', '--bogus'], 2],
      [['tokens', 'create'], 2],
      [['tokens', 'revoke'], 2],
      [['tokens', 'revoke', 'a', 'b'], 2],
      [['webhooks', 'deliveries', '--limit'], 2],
      [['webhooks', 'deliveries', '--limit', '0'], 2],
      [['completion', 'tcsh'], 2],
      [['tokens', 'list'], 1],
      [['import', path.join(folder, 'missing.ndjson')], 1],
    ] as const) {
      const result = await runCli([...args], env)
      assert.equal(result.code, code, `${args.join(' ')}: ${result.stderr}`)
      const first = result.stderr.split('\n')[0] as string
      assert.match(first, /^plant-store: [a-z"\-/A-Z]/, args.join(' '))
      assert.doesNotMatch(first, /^plant-store: (error|Error|Unknown)|\.$/, `${args.join(' ')}: ${first}`)
    }
  })

  it('agrees counts with their nouns: 1 plant, 1 conflict, 1 bad line', async () => {
    const folder = tempDir()
    const env = { PLANT_STORE_DB: path.join(folder, 'plants.db') }
    const first = path.join(folder, 'first.ndjson')
    fs.writeFileSync(first, '{"id":1,"name":"one"}\n')
    assert.equal((await runCli(['import', first], env)).code, 0)
    const exported = await runCli(['export', path.join(folder, 'out.ndjson')], env)
    assert.match(exported.stderr, /^exported 1 plant to /)
    const second = path.join(folder, 'second.ndjson')
    fs.writeFileSync(second, '{"id":1,"name":"other"}\nnot json\n{"id":2,"name":"two"}\n')
    const imported = await runCli(['import', second], env)
    assert.equal(imported.code, 1)
    assert.match(imported.stderr, /imported: 1 created, 0 already present, 1 conflict, 1 bad line\n/)
    assert.match(imported.stderr, /plant-store: 2 lines were not imported/)
  })

  it('reports the problems of an import in line order, conflicts and bad lines alike', async () => {
    const folder = tempDir()
    const env = { PLANT_STORE_DB: path.join(folder, 'plants.db') }
    const seed = path.join(folder, 'seed.ndjson')
    fs.writeFileSync(seed, Array.from({ length: 50 }, (_, i) => `{"id":${i},"name":"seed"}\n`).join(''))
    assert.equal((await runCli(['import', seed], env)).code, 0)
    // Conflicts (ids taken by another name) answered by the store, bad lines known at once.
    const lines = Array.from({ length: 100 }, (_, i) =>
      i % 2 === 0 ? `{"id":${i / 2},"name":"other"}` : `{"id":"bad ${i}"}`,
    )
    const file = path.join(folder, 'mixed.ndjson')
    fs.writeFileSync(file, `${lines.join('\n')}\n`)
    const result = await runCli(['import', file], env)
    assert.equal(result.code, 1)
    const reported = [...result.stderr.matchAll(/^line (\d+): /gm)].map((m) => Number(m[1]))
    assert.equal(reported.length, 100)
    assert.deepEqual(
      reported,
      Array.from({ length: 100 }, (_, i) => i + 1),
    )
  })
})

const hasScript = spawnSync('script', ['--version']).status === 0
if (
  suiteRunsHere('the CLI on a terminal', hasScript, 'script(1) from util-linux', 'apt-get install util-linux')
) {
  describe('the CLI on a terminal', () => {
    const tokenEnv = async () => {
      const env = { PLANT_STORE_DB: path.join(tempDir(), 'plants.db') }
      const long = 'a deploy robot with a name far longer than a column has room for, really'
      for (const args of [
        ['--name', long, '--scopes', 'plants:read,plants:write,metrics:read', '--expires-in', '30d'],
        ['--name', 'ci'],
      ])
        assert.equal((await runCli(['tokens', 'create', ...args], env)).code, 0)
      const id = JSON.parse((await runCli(['tokens', 'list', '--json'], env)).stdout)[1].id as string
      assert.equal((await runCli(['tokens', 'revoke', id], env)).code, 0)
      return env
    }

    it('tokens list fits 80 columns with relative times on a terminal; ISO when piped and in --json', async () => {
      const env = await tokenEnv()
      const screen = (await onScreen(['tokens', 'list'], { ...env, NO_COLOR: '1' })).trimEnd().split('\n')
      assert.equal(screen.length, 3, screen.join('\n'))
      for (const line of screen) assert.ok([...line].length <= 80, `${[...line].length} columns: ${line}`)
      assert.match(screen[0] as string, /^ID +NAME +SCOPES +EXPIRES +LAST USED$/)
      assert.match(screen.join('\n'), /in 29 d|in 30 d/)
      assert.match(screen.join('\n'), /revoked/)
      assert.match(screen.join('\n'), /a deploy robot.*…/)
      assert.doesNotMatch(screen.join('\n'), /\d{4}-\d{2}-\d{2}T/)
      const piped = await runCli(['tokens', 'list'], env)
      assert.match(piped.stdout, /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/)
      const json = JSON.parse((await runCli(['tokens', 'list', '--json'], env)).stdout) as {
        created: string
      }[]
      assert.match(json[0]?.created ?? '', /^\d{4}-\d{2}-\d{2}T/)
    })

    it('colours on a terminal only: never with NO_COLOR set, never into a pipe', async () => {
      const env = await tokenEnv()
      assert.match(await onScreen(['tokens', 'list'], env), SGR)
      assert.ok((await onScreen(['tokens', 'bogus'], env)).includes('\u001b[31mplant-store:'))
      assert.doesNotMatch(await onScreen(['tokens', 'list'], { ...env, NO_COLOR: '1' }), SGR)
      assert.doesNotMatch(await onScreen(['tokens', 'bogus'], { ...env, NO_COLOR: 'yes' }), SGR)
      const piped = await runCli(['tokens', 'list'], { ...env, FORCE_COLOR: '1' })
      assert.doesNotMatch(piped.stdout + piped.stderr, SGR)
      const error = await runCli(['tokens', 'bogus'], env)
      assert.doesNotMatch(error.stderr, SGR)
    })
  })
}
