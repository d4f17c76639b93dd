import assert from 'node:assert/strict'
import { readdirSync, readFileSync, rmSync } from 'node:fs'
import path from 'node:path'
import { after, describe, it } from 'node:test'
import { startService } from './helpers.js'
import { observedResponsesDir, request } from './http-client.js'

interface Observation {
  method: string
  route: string
  status: number
}

/**
 * Runs last (the runner takes files in path order): every (method, route, status) that any test
 * saw must be declared in the served document. 404 for unknown routes and 405 for unknown methods
 * are not operations and are checked for their own status instead.
 */
describe('the served document declares every response the tests observed', () => {
  const dir = observedResponsesDir()
  after(() => rmSync(dir, { recursive: true, force: true }))

  it('has no undeclared (method, route, status)', async () => {
    const service = await startService('sqlite')
    const doc = (await request('GET', `${service.url}/openapi.json`)).json
    await service.close()

    const seen = new Map<string, Observation>()
    for (const file of readdirSync(dir)) {
      for (const line of readFileSync(path.join(dir, file), 'utf8').split('\n').filter(Boolean)) {
        const observation = JSON.parse(line) as Observation
        seen.set(`${observation.method} ${observation.route} ${observation.status}`, observation)
      }
    }
    assert.ok(seen.size >= 20, `expected the suite to observe many kinds of response, saw ${seen.size}`)

    const undeclared: string[] = []
    for (const [key, { method, route, status }] of seen) {
      const operation = doc.paths[route]?.[method === 'HEAD' ? 'get' : method.toLowerCase()]
      if (!operation) {
        if (status !== 404 && status !== 405) undeclared.push(`${key} (no such operation)`)
        continue
      }
      if (!operation.responses[String(status)]) undeclared.push(key)
    }
    assert.deepEqual(undeclared, [])
  })
})
