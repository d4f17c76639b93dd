import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { ENV_HELP, SERVE_ENV, STORE_ENV } from '../../src/cli/env-help.js'
import { loadConfig } from '../../src/config.js'
import { configurationTable, writeConfigurationTables } from '../../src/config/env-docs.js'
import { ENV_VARIABLES } from '../../src/config/env-schema.js'
import { formatSize } from '../../src/config/text-readers.js'

// dist/test/unit -> the repository, where the docs are.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..')
const schemaNames = ENV_VARIABLES.map(([name]) => name)

/** Names loadConfig actually reads from an empty environment (the defaults' path). */
function variablesRead(): string[] {
  const read = new Set<string>()
  const env = new Proxy({} as Record<string, string | undefined>, {
    get(target, key) {
      if (typeof key === 'string') read.add(key)
      return target[key as string]
    },
  })
  loadConfig(env)
  return [...read]
}

describe('docs/configuration.md', () => {
  const page = readFileSync(path.join(root, 'docs/configuration.md'), 'utf8')

  it('has the tables scripts/config-docs.mjs writes from the schema (run it after a change)', () => {
    assert.equal(page, writeConfigurationTables(page), 'run `npm run build && node scripts/config-docs.mjs`')
  })

  it('has a marked table for each group of the schema, so every variable is on the page', () => {
    const groups = new Set(ENV_VARIABLES.map(([, variable]) => variable['x-group']))
    for (const group of groups) {
      assert.ok(
        page.includes(`<!-- config-table ${group} -->\n${configurationTable(group)}\n<!-- /config-table -->`),
      )
    }
    for (const name of schemaNames) assert.ok(page.includes(`| \`${name}\` |`), name)
  })

  it('the check can fail: a changed default is seen', () => {
    const edited = page.replace('| `PORT` | `8080` |', '| `PORT` | `8081` |')
    assert.notEqual(edited, page)
    assert.notEqual(writeConfigurationTables(edited), edited)
  })
})

describe('the schema is the one list of variables', () => {
  it('loadConfig reads exactly the variables the schema declares', () => {
    assert.deepEqual(variablesRead().sort(), [...schemaNames].sort())
  })

  it('`serve --help` describes the same variables, and the store commands a subset', () => {
    assert.deepEqual(SERVE_ENV, schemaNames)
    for (const name of STORE_ENV) assert.ok(schemaNames.includes(name), name)
  })

  it("`--help` shows, as each variable's default, the value loadConfig takes when it is unset", () => {
    const config = loadConfig({}, false) as unknown as Record<string, unknown>
    let compared = 0
    for (const [name, variable] of ENV_VARIABLES) {
      // Words (`x-default`) and a resolved path are not a value to compare.
      if (variable['x-key'] === undefined || variable['x-default'] !== undefined) continue
      if (variable['x-read'] === 'file-path') continue
      const value = config[variable['x-key']]
      const shown =
        typeof value === 'number' && variable['x-read'] === 'size'
          ? formatSize(value)
          : String(value ?? 'unset')
      assert.equal(ENV_HELP[name]?.[0], shown, name)
      compared++
    }
    assert.ok(compared > 30, `${compared} compared`)
  })
})
