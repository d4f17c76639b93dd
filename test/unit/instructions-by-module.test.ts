import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { projectRoot, tempDir } from '../helpers.js'

const script = path.join(projectRoot, 'bench/lib/instructions-by-module.mjs')

/**
 * A bundle's first function (module a) calls an inline cache and then a second function (package
 * pkg), which calls Node's HTTP code through a call builtin; the event loop runs outside them all.
 */
const CALLGRIND = `events: Ir
fn=(1) 0x1000
0 1000
cfn=(2) Builtins_LoadIC
calls=1 0
0 500
cfn=(3) 0x2000
calls=1 0
0 4000
fn=(2)
0 500
fn=(3)
0 3000
cfn=(4) Builtins_CallFunction
calls=1 0
0 1000
fn=(4)
0 200
cfn=(5) 0x3000
calls=1 0
0 800
fn=(5)
0 800
fn=(6) uv_run
0 300
`

function byModule(requests: number): Map<string, number> {
  const dir = tempDir()
  const bundle = path.join(dir, 'main.js')
  writeFileSync(
    bundle,
    '// dist/src/a.js\nfunction first() {}\n// node_modules/pkg/lib/x.js\nfunction second() {}\n',
  )
  const url = `file://${bundle}`
  writeFileSync(
    path.join(dir, 'perf.map'),
    `1000 100 JS:*first ${url}:2:1\n2000 100 JS:^second ${url}:4:1\n3000 100 JS:*parserOnIncoming node:_http_server:10:1\n`,
  )
  writeFileSync(path.join(dir, 'callgrind.out'), CALLGRIND)
  const run = spawnSync(
    process.execPath,
    [script, path.join(dir, 'callgrind.out'), path.join(dir, 'perf.map'), bundle, String(requests)],
    { encoding: 'utf8' },
  )
  assert.equal(run.status, 0, run.stderr)
  const rows = new Map<string, number>()
  for (const line of run.stdout.split('\n').slice(1)) {
    const match = /^\s*(\d+)\s+(\S.*)$/.exec(line)
    if (match) rows.set(match[2] as string, Number(match[1]))
  }
  assert.match(run.stdout, new RegExp(`^main thread: ${5800 / requests} instructions per request`))
  return rows
}

describe('instructions by module (bench/lib/instructions-by-module.mjs)', () => {
  it('charges a function with the builtins it calls, not with the JavaScript they call back into', () => {
    assert.deepEqual(
      byModule(1),
      new Map([
        // second: its own 3,000 and the call builtin's own 200 of 1,000 (800 are parserOnIncoming's).
        ['node_modules/pkg', 3200],
        // first: its own 1,000 and the inline cache's 500; second's 4,000 are second's.
        ['src/a.ts', 1500],
        ['node: http, net', 800],
        ['outside JavaScript (event loop, GC, native callbacks)', 300],
      ]),
    )
  })

  it('divides by the requests counted and leaves out rows under 100 per request', () => {
    assert.deepEqual(
      byModule(10),
      new Map([
        ['node_modules/pkg', 320],
        ['src/a.ts', 150],
      ]),
    )
  })
})
