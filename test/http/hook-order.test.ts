/** The hooks a request runs, in the order docs/development.md's pipeline table states. */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { loadConfig } from '../../src/config.js'
import type { RunningServer } from '../../src/server.js'
import { startServer } from '../../src/server.js'
import { openStorage } from '../../src/storage/open.js'
import { issueToken, projectRoot, serviceEnv, waitFor } from '../helpers.js'
import { request } from '../http-client.js'

/** The labels of the table's rows, in order: the hooks a POST /plants runs. */
function documentedOrder(): string[] {
  const doc = readFileSync(path.join(projectRoot, 'docs/development.md'), 'utf8')
  const section = doc.slice(doc.indexOf('## The request pipeline'), doc.indexOf('## Build'))
  return [...section.matchAll(/^\| \w+ \| `([^`]+)` \|/gm)].map((match) => match[1] as string)
}

describe('hook order', () => {
  let server: RunningServer
  let url: string
  let token: string
  before(async () => {
    const config = loadConfig(await serviceEnv('sqlite'))
    const storage = await openStorage(config)
    server = await startServer(config, storage, [], { recordHookOrder: true })
    const address = server.app.server.address()
    if (!address || typeof address === 'string') throw new Error('server has no TCP address')
    url = `http://127.0.0.1:${address.port}`
    token = await issueToken(storage)
  })
  after(() => server.shutdown('test finished'))

  // onResponse runs after the answer has gone: the last label is awaited, not assumed.
  const ranFor = (requestId: string) =>
    waitFor(`the hooks of ${requestId} to finish`, () => {
      const labels = server.app.hookOrder?.of(requestId) ?? []
      return labels.at(-1) === 'observability: finish' ? labels : undefined
    })

  it('runs the hooks of a POST /plants in the documented order', async () => {
    const documented = documentedOrder()
    assert.ok(documented.length >= 8, `the table lists ${documented.length} hooks`)
    const created = await request('POST', `${url}/plants`, {
      token,
      body: { id: 1, name: 'Fern' },
      headers: { 'x-request-id': 'order-create' },
    })
    assert.equal(created.status, 200, created.text)
    assert.deepEqual(await ranFor('order-create'), documented)
  })

  it('stops at the check that refuses, and still sends and observes the answer', async () => {
    const refused = await request('POST', `${url}/plants`, {
      body: { id: 2, name: 'Moss' },
      headers: { 'x-request-id': 'order-refused' },
    })
    assert.equal(refused.status, 401, refused.text)
    assert.deepEqual(await ranFor('order-refused'), [
      'protocol: admit',
      'observability: start',
      'request-checks: head',
      'auth: plants:write',
      'protocol: drain and lingering close',
      'observability: finish',
    ])
  })

  it('answers an unknown path from the preParsing check, after the head checks', async () => {
    const missing = await request('GET', `${url}/nowhere`, { headers: { 'x-request-id': 'order-404' } })
    assert.equal(missing.status, 404, missing.text)
    assert.deepEqual(await ranFor('order-404'), [
      'protocol: admit',
      'observability: start',
      'request-checks: head',
      'request-checks: route and query',
      'protocol: drain and lingering close',
      'observability: finish',
    ])
  })
})
