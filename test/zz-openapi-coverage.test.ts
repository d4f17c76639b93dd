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
  headers: string[]
}

/**
 * Runs last (the runner takes files in path order): every (method, route, status) that any test
 * saw must be declared in the served document, with the headers a client acts on that it carried. 404 for unknown routes and 405 for unknown methods
 * are not operations and are checked for their own status instead.
 */
describe('the served document declares every response the tests observed', () => {
  const dir = observedResponsesDir()
  after(() => rmSync(dir, { recursive: true, force: true }))

  it('has no undeclared (method, route, status) nor header sent with one', async () => {
    const service = await startService('sqlite')
    const doc = (await request('GET', `${service.url}/openapi.json`)).json
    await service.close()

    // One entry per (method, route, status), and one more per declared header it was seen with.
    const seen = new Map<string, Observation & { header?: string }>()
    for (const file of readdirSync(dir)) {
      for (const line of readFileSync(path.join(dir, file), 'utf8').split('\n').filter(Boolean)) {
        const observation = JSON.parse(line) as Observation
        const { method, route, status } = observation
        seen.set(`${method} ${route} ${status}`, observation)
        for (const header of observation.headers)
          seen.set(`${method} ${route} ${status} ${header}`, { ...observation, header })
      }
    }
    assert.ok(seen.size >= 20, `expected the suite to observe many kinds of response, saw ${seen.size}`)

    const undeclared: string[] = []
    for (const [key, { method, route, status, header }] of seen) {
      const operation = doc.paths[route]?.[method === 'HEAD' ? 'get' : method.toLowerCase()]
      if (!operation) {
        if (status !== 404 && status !== 405) undeclared.push(`${key} (no such operation)`)
        continue
      }
      const response = operation.responses[String(status)]
      const declared = Object.keys(response?.headers ?? {}).map((name) => name.toLowerCase())
      if (!response || (header && !declared.includes(header))) undeclared.push(key)
    }
    assert.deepEqual(undeclared, [])
  })
})
