/** The client's committed types are what openapi-typescript makes of the document the service serves now. */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { it } from 'node:test'
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
