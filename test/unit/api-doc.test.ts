import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { errorCatalog } from '../../src/errors.js'

// dist/test/unit -> the repository, where the docs are.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..')

/** Rows of the `| Code | Status | Meaning |` table: code -> status. */
function documentedCodes(markdown: string): Map<string, number> {
  const codes = new Map<string, number>()
  let inTable = false
  for (const line of markdown.split('\n')) {
    if (/^\|\s*Code\s*\|\s*Status\s*\|\s*Meaning\s*\|\s*$/.test(line)) inTable = true
    else if (!line.startsWith('|')) inTable = false
    else if (inTable) {
      const row = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|\s*(\d{3})\s*\|/.exec(line)
      if (row) codes.set(row[1]!, Number(row[2]))
    }
  }
  return codes
}

describe('docs/api.md error codes', () => {
  it('lists every code of src/errors.ts with its status, and no other', () => {
    const documented = documentedCodes(readFileSync(path.join(root, 'docs/api.md'), 'utf8'))
    const catalog = new Map(Object.entries(errorCatalog).map(([code, entry]) => [code, entry.status]))
    assert.ok(catalog.size > 10 && documented.size > 10, 'both lists are read')
    assert.deepEqual(
      [...documented].sort(),
      [...catalog].sort(),
      'the "| Code | Status | Meaning |" table of docs/api.md and the catalog in src/errors.ts differ',
    )
  })
})
