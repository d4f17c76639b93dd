import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { projectRoot, tempDir } from '../helpers.js'

const script = path.join(projectRoot, 'scripts/openapi-coverage.mjs')

/** Every (method, route, status) the served document declares, as test/http-client.ts records them. */
function declaredObservations(): string[] {
  const file = path.join(tempDir(), 'openapi.json')
  execFileSync(process.execPath, [path.join(projectRoot, 'scripts/dump-openapi.mjs'), file])
  const doc = JSON.parse(readFileSync(file, 'utf8'))
  return Object.entries(doc.paths as Record<string, Record<string, { responses: object }>>).flatMap(
    ([route, operations]) =>
      Object.entries(operations).flatMap(([method, operation]) =>
        Object.keys(operation.responses).map((status) =>
          JSON.stringify({ method: method.toUpperCase(), route, status: Number(status), headers: [] }),
        ),
      ),
  )
}

describe('the OpenAPI coverage step (scripts/openapi-coverage.mjs)', () => {
  const declared = declaredObservations()

  it('passes when every recorded response is declared', () => {
    const dir = tempDir()
    writeFileSync(path.join(dir, '1.jsonl'), `${declared.join('\n')}\n`)
    const run = spawnSync(process.execPath, [script, dir], { encoding: 'utf8' })
    assert.equal(run.status, 0, run.stderr)
  })

  it('fails, naming it, on a status or a header the document does not declare', () => {
    const dir = tempDir()
    writeFileSync(path.join(dir, '1.jsonl'), `${declared.join('\n')}\n`)
    const undeclared = [
      { method: 'GET', route: '/plants', status: 418, headers: [] },
      { method: 'GET', route: '/healthz', status: 200, headers: ['ratelimit-limit'] },
    ]
    writeFileSync(path.join(dir, '2.jsonl'), `${undeclared.map((o) => JSON.stringify(o)).join('\n')}\n`)
    const run = spawnSync(process.execPath, [script, dir], { encoding: 'utf8' })
    assert.equal(run.status, 1)
    assert.match(run.stderr, /GET \/plants 418/)
    assert.match(run.stderr, /GET \/healthz 200 ratelimit-limit/)
  })

  it('fails when the suite recorded next to nothing', () => {
    const run = spawnSync(process.execPath, [script, tempDir()], { encoding: 'utf8' })
    assert.equal(run.status, 1)
    assert.match(run.stderr, /expected the suite to observe many kinds of response, saw 0/)
  })
})
