/**
 * Two `serve` processes on one SQLite file, as `--workers 2` or two instances run it: what one
 * process acknowledged, a read through the other shows at once, while that other process's own
 * writer commits and syncs creates of its own all the while.
 */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { type SpawnedService, spawnService, stopService, startServiceProcess } from '../helpers.js'
import { request } from '../http-client.js'

describe('two processes on one SQLite file', () => {
  let busy: SpawnedService
  let other: SpawnedService
  let token: string

  before(async () => {
    const started = await startServiceProcess('sqlite', { name: 'two processes' })
    ;({ token, service: busy } = started)
    other = await spawnService(started.env)
  })

  after(async () => {
    await Promise.all([busy, other].filter(Boolean).map((service) => stopService(service)))
  })

  it("shows the other process's creates and deletes to the next read and list, under writes", async () => {
    // Keeps the busy process's writer committing and syncing, so that most reads through either
    // process arrive while a commit of the other is under way.
    let loading = true
    let loadId = 1_000_000
    const load = Promise.all(
      Array.from({ length: 8 }, async () => {
        while (loading) {
          const response = await request('POST', `${busy.url}/plants`, {
            token,
            body: { id: loadId++, name: 'load' },
          })
          assert.equal(response.status, 200, response.text)
        }
      }),
    )
    const stale: string[] = []
    try {
      for (let round = 1; round <= 300; round++) {
        // Each id is the smallest stored yet, so it heads the first page.
        const id = -round
        const created = await request('POST', `${other.url}/plants`, {
          token,
          body: { id, name: `p${round}` },
        })
        assert.equal(created.status, 200, created.text)
        const listed = await request('GET', `${busy.url}/plants?limit=5`, { token })
        if (listed.json[0]?.id !== id)
          stale.push(`round ${round}: the list after the 200 began ${listed.text}`)
        const read = await request('GET', `${busy.url}/plants/${id}`, { token })
        if (read.status !== 200) stale.push(`round ${round}: the read after the 200 was ${read.status}`)
        const deleted = await request('DELETE', `${other.url}/plants/${id}`, { token })
        assert.equal(deleted.status, 204)
        const after = await request('GET', `${busy.url}/plants?limit=5`, { token })
        if (after.json.some((plant: { id: number }) => plant.id === id))
          stale.push(`round ${round}: the list after the 204 held ${after.text}`)
      }
    } finally {
      loading = false
      await load
    }
    assert.deepEqual(stale, [])
  })
})
