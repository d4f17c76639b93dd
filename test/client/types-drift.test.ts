/**
 * The client's committed types are what openapi-typescript makes of the document the service serves
 * now, and its public types are named (src/types-in-step.ts fails the build when they drift).
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { it } from 'node:test'
import ts from 'typescript'
import { projectRoot, startService } from '../helpers.js'

const clientDir = path.join(projectRoot, 'clients/typescript')

it('has generated types that match the served document (else: npm run generate -w @plant-store/client)', async () => {
  const service = await startService('sqlite')
  const served = await (await fetch(`${service.url}/openapi.json`)).text()
  await service.close()
  const { generateTypes } = (await import(path.join(clientDir, 'scripts/types-from-document.mjs'))) as {
    generateTypes: (document: string) => Promise<string>
  }
  const committed = readFileSync(path.join(clientDir, 'src/generated/openapi.ts'), 'utf8')
  assert.equal(committed, await generateTypes(served))
  // The comparison can fail: a document with one more operation makes other types.
  const changed = JSON.parse(served)
  changed.paths['/extra'] = { get: { operationId: 'extra', responses: { 200: { description: 'x' } } } }
  assert.notEqual(committed, await generateTypes(JSON.stringify(changed)))
})

it('shows named types in editor hovers, not the generated shapes they stand for', () => {
  // What an editor asks TypeScript's language service when the pointer rests on a name.
  const file = path.join(projectRoot, 'hover-probe.ts')
  const text = [
    "import { PlantStoreClient, type NewPlant } from '@plant-store/client'",
    'declare const client: PlantStoreClient',
    'export async function probe(newPlant: NewPlant) {',
    '  const created = await client.createPlant(newPlant)',
    '  const stored = await client.getPlant(newPlant.id)',
    '  const page = await client.listPlants({ after: stored.id })',
    '  return { created, stored, page }',
    '}',
  ].join('\n')
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    noEmit: true,
  }
  const service = ts.createLanguageService({
    getScriptFileNames: () => [file],
    getScriptVersion: () => '1',
    getScriptSnapshot: (name) => {
      const content = name === file ? text : ts.sys.readFile(name)
      return content === undefined ? undefined : ts.ScriptSnapshot.fromString(content)
    },
    getCurrentDirectory: () => projectRoot,
    getCompilationSettings: () => options,
    getDefaultLibFileName: (compilerOptions) => ts.getDefaultLibFilePath(compilerOptions),
    fileExists: (name) => name === file || ts.sys.fileExists(name),
    readFile: (name) => (name === file ? text : ts.sys.readFile(name)),
    readDirectory: ts.sys.readDirectory,
    directoryExists: ts.sys.directoryExists,
    getDirectories: ts.sys.getDirectories,
  })
  assert.deepEqual(
    service.getSemanticDiagnostics(file).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')),
    [],
  )
  const hover = (word: string, from = 'export async') => {
    const info = service.getQuickInfoAtPosition(file, text.indexOf(word, text.indexOf(from)))
    return ts.displayPartsToString(info?.displayParts)
  }
  assert.equal(hover('NewPlant', 'import'), '(alias) interface NewPlant\nimport NewPlant')
  assert.equal(hover('created'), 'const created: Plant')
  assert.equal(hover('stored'), 'const stored: StoredPlant')
  assert.equal(hover('page'), 'const page: PlantPage')
  assert.equal(
    hover('listPlants'),
    '(method) PlantStoreClient.listPlants(list?: ListOptions, options?: CallOptions): Promise<PlantPage>',
  )
})
