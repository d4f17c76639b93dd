/**
 * The recipe of docs/client.md for a client generated from the served document: its code blocks
 * are written out as they stand, generated, compiled and run against a real service. Beside it,
 * the same generator and openapi-fetch with their defaults, to show the loss the recipe avoids.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { promisify } from 'node:util'
import { projectRoot, startService, type TestService, tempDir, testStores } from '../helpers.js'

const run = promisify(execFile)

/** The code blocks of docs/client.md that open with `// <file>:`, by file name. */
function recipeFiles(): Map<string, string> {
  const doc = readFileSync(path.join(projectRoot, 'docs/client.md'), 'utf8')
  const files = new Map<string, string>()
  for (const [, code = ''] of doc.matchAll(/```(?:ts|js)\n([\s\S]*?)```/g)) {
    const name = /^\/\/ ([\w.-]+\.(?:ts|mjs)):/.exec(code)?.[1]
    if (name) files.set(name, code)
  }
  return files
}

const TSCONFIG = {
  compilerOptions: {
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    target: 'ES2022',
    lib: ['ES2022'],
    types: ['node'],
    strict: true,
    noUncheckedIndexedAccess: true,
    skipLibCheck: true,
  },
}

/**
 * Compiles `file` as a strict ESM project would, with tsc in its own process: a compile in this
 * one would hold the event loop of the service under test, which then answers 503 (overloaded).
 */
async function compile(dir: string, file: string): Promise<void> {
  writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ ...TSCONFIG, files: [file] }))
  const tsc = path.join(projectRoot, 'node_modules/typescript/bin/tsc')
  await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: dir }).catch(
    (error: { stdout?: string }) => {
      throw new Error(`tsc failed:\n${error.stdout}`)
    },
  )
}

/** openapi-typescript with its defaults, as a user who has not read the recipe runs it. */
const GENERATE_DEFAULT = `import fs from 'node:fs'
import openapiTS, { astToString } from 'openapi-typescript'
fs.writeFileSync(process.argv[3], astToString(await openapiTS(new URL(process.argv[2]))))
`

/** The defaults' client: the same two creates (as JSON text), a list and a delete of the second. */
const DEFAULTS_TRY = `import createClient from 'openapi-fetch'
import type { paths } from './plant-store-api.js'
const api = createClient<paths>({ baseUrl: process.argv[2], headers: { authorization: \`Bearer \${process.argv[3]}\` } })
// Written as JSON text: the defaults cannot even send 9007199254740993 from a number.
const created: number[] = []
for (const id of ['9007199254740992', '9007199254740993']) {
  const body = \`{"id":\${id},"name":"plant \${id}"}\` as never
  created.push((await api.POST('/plants', { body, bodySerializer: (text) => text })).response.status)
}
const { data: listed = [], error } = await api.GET('/plants')
if (listed.length !== 2) throw new Error(\`created \${created}, listed \${JSON.stringify(listed ?? error)}\`)
const { response } = await api.DELETE('/plants/{id}', { params: { path: { id: listed[1]!.id } } })
console.log(JSON.stringify({ created, listed: listed.map((plant) => plant.id), deleted: response.status }))
`

/** An empty ESM project folder that sees this repository's node_modules. */
function project(): string {
  const dir = tempDir('plant-store-generated-client-')
  writeFileSync(path.join(dir, 'package.json'), '{ "private": true, "type": "module" }\n')
  symlinkSync(path.join(projectRoot, 'node_modules'), path.join(dir, 'node_modules'), 'dir')
  return dir
}

/** The recipe's files as docs/client.md has them, generated from `document` and compiled. */
async function buildRecipe(document: string): Promise<string> {
  const dir = project()
  const files = recipeFiles()
  assert.deepEqual([...files.keys()].sort(), ['exact-json.ts', 'generate.mjs', 'plant-store.ts', 'try.ts'])
  for (const [name, code] of files) writeFileSync(path.join(dir, name), code)
  await run(process.execPath, ['generate.mjs', document, 'plant-store-api.ts'], { cwd: dir })
  assert.match(readFileSync(path.join(dir, 'plant-store-api.ts'), 'utf8'), /\bid: string;/)
  await compile(dir, 'try.ts')
  return dir
}

/** The same steps with openapi-typescript's and openapi-fetch's defaults. */
async function buildDefaults(document: string): Promise<string> {
  const dir = project()
  writeFileSync(path.join(dir, 'generate-default.mjs'), GENERATE_DEFAULT)
  await run(process.execPath, ['generate-default.mjs', document, 'plant-store-api.ts'], { cwd: dir })
  assert.match(readFileSync(path.join(dir, 'plant-store-api.ts'), 'utf8'), /\bid: number;/)
  writeFileSync(path.join(dir, 'try.ts'), DEFAULTS_TRY)
  await compile(dir, 'try.ts')
  return dir
}

/** Generated and compiled once, from the first service's document; run against every store. */
let recipe: Promise<string> | undefined
let defaults: Promise<string> | undefined

for (const store of testStores()) {
  describe(`a client generated with openapi-typescript + openapi-fetch (${store})`, () => {
    let service: TestService
    let token: string
    before(async () => {
      service = await startService(store)
      token = await service.token()
    })
    after(() => service.close())

    /** Which of the two neighbouring ids the store holds. */
    const stored = async () => {
      const held: bigint[] = []
      for (const id of [9007199254740992n, 9007199254740993n])
        if ((await service.storage.readPlantJson(id)) !== undefined) held.push(id)
      return held
    }

    it("keeps every digit with docs/client.md's recipe: lists, reads and deletes 9007199254740993", async () => {
      recipe ??= buildRecipe(`${service.url}/openapi.json`)
      const { stdout } = await run(process.execPath, ['try.js', service.url, token], { cwd: await recipe })
      assert.deepEqual(JSON.parse(stdout), {
        listed: ['9007199254740992', '9007199254740993'],
        read: '9007199254740993',
        deleted: 204,
      })
      assert.deepEqual(await stored(), [9007199254740992n])
      await service.storage.deletePlant(9007199254740992n)
    })

    it('loses ids with the defaults: 9007199254740993 lists as ...992, and deleting it deletes ...992', async () => {
      defaults ??= buildDefaults(`${service.url}/openapi.json`)
      const { stdout } = await run(process.execPath, ['try.js', service.url, token], { cwd: await defaults })
      assert.deepEqual(JSON.parse(stdout), {
        created: [200, 200],
        listed: [9007199254740992, 9007199254740992],
        deleted: 204,
      })
      // The neighbour went: the plant the caller meant to delete is still there.
      assert.deepEqual(await stored(), [9007199254740993n])
      await service.storage.deletePlant(9007199254740993n)
    })
  })
}
