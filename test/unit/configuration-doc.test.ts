import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { SERVE_ENV } from '../../src/cli/env-help.js'
import { loadConfig } from '../../src/config.js'

// dist/test/unit -> the repository, where the sources and docs are.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..')
const TABLE_HEADER = /^\|\s*Variable\s*\|\s*Default\s*\|\s*Meaning\s*\|\s*$/

/** Names in every `| Variable | Default | Meaning |` table of the page, in order of appearance. */
function documentedVariables(markdown: string): string[] {
  const names: string[] = []
  let inTable = false
  for (const line of markdown.split('\n')) {
    if (TABLE_HEADER.test(line)) inTable = true
    else if (!line.startsWith('|')) inTable = false
    else if (inTable) {
      const name = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|/.exec(line)?.[1]
      if (name !== undefined) names.push(name)
    }
  }
  return names
}

/** Environment names config.ts names in its source: `env.X`, `env['X']`, or a helper's `(env, 'X'`. */
function variablesInSource(source: string): Set<string> {
  const patterns = [
    /\benv\??\.([A-Z][A-Z0-9_]*)\b/g,
    /\benv\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\]/g,
    /\(\s*env\s*,\s*['"]([A-Z][A-Z0-9_]*)['"]/g,
  ]
  const names = new Set<string>()
  for (const pattern of patterns) for (const match of source.matchAll(pattern)) names.add(match[1]!)
  return names
}

/** Names loadConfig actually reads from an empty environment (the defaults' path). */
function variablesRead(): Set<string> {
  const read = new Set<string>()
  const env = new Proxy({} as Record<string, string | undefined>, {
    get(target, key) {
      if (typeof key === 'string') read.add(key)
      return target[key as string]
    },
  })
  loadConfig(env)
  return read
}

describe('docs/configuration.md', () => {
  const page = readFileSync(path.join(root, 'docs/configuration.md'), 'utf8')
  const documented = documentedVariables(page)
  const source = variablesInSource(readFileSync(path.join(root, 'src/config.ts'), 'utf8'))
  const read = variablesRead()

  it('finds the variables both ways (the parsers themselves work)', () => {
    for (const name of ['PORT', 'DATABASE_URL', 'PLANT_STORE_DB', 'TRUST_PROXY']) {
      assert.ok(documented.includes(name), `${name} in the table`)
      assert.ok(source.has(name), `${name} in src/config.ts`)
      assert.ok(read.has(name), `${name} read by loadConfig`)
    }
  })

  it('documents every variable src/config.ts reads, and no other', () => {
    const inConfig = new Set([...source, ...read])
    const missing = [...inConfig].filter((name) => !documented.includes(name)).sort()
    const extra = documented.filter((name) => !inConfig.has(name)).sort()
    assert.deepEqual(
      { missing, extra },
      { missing: [], extra: [] },
      'missing: read by src/config.ts but not in a "| Variable | Default | Meaning |" table of docs/configuration.md; extra: in the table but not read',
    )
  })

  it('and `serve --help` describes the same variables', () => {
    const inConfig = [...new Set([...source, ...read])].sort()
    assert.deepEqual([...SERVE_ENV].sort(), inConfig)
  })

  it('lists each variable once', () => {
    const twice = documented.filter((name, i) => documented.indexOf(name) !== i)
    assert.deepEqual(twice, [])
  })
})
