/** The TypeScript client (built, as installed) against a real service: exact ids both ways, lists, deletes. */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { PlantStoreClient } from '@plant-store/client'
import { startService, testStores, type TestService } from '../helpers.js'
import { request } from '../http-client.js'

const INT64_MAX = 9223372036854775807n
const INT64_MIN = -9223372036854775808n

for (const store of testStores()) {
  describe(`@plant-store/client: plants (${store})`, () => {
    let service: TestService
    let client: PlantStoreClient
    before(async () => {
      service = await startService(store)
      client = new PlantStoreClient({ baseUrl: service.url, token: await service.token() })
    })
    after(() => service.close())

    it('creates and reads the largest and smallest int64 with every digit', async () => {
      for (const id of [INT64_MAX, INT64_MIN]) {
        assert.deepEqual(await client.createPlant({ id, name: `edge ${id}`, tag: 'int64' }), {
          name: `edge ${id}`,
          tag: 'int64',
        })
        assert.deepEqual(await client.getPlant(id), { id, name: `edge ${id}`, tag: 'int64' })
        // What the service stored, read without the client: the digits as sent.
        const raw = await request('GET', `${service.url}/plants/${id}`, { token: await service.token() })
        assert.equal(raw.text, `{"id":${id},"name":"edge ${id}","tag":"int64"}`)
      }
      const listed = (await client.listPlants({ limit: 1000 })).plants.map((plant) => plant.id)
      assert.deepEqual([listed[0], listed.at(-1)], [INT64_MIN, INT64_MAX])
      await client.deletePlant(INT64_MAX)
      await client.deletePlant(INT64_MIN)
    })

    it('keeps 9007199254740992 and 9007199254740993 apart: both listed, the deleted one is the one gone', async () => {
      const low = 9007199254740992n
      const high = 9007199254740993n
      await client.createPlant({ id: low, name: 'two to the 53' })
      await client.createPlant({ id: high, name: 'one past it' })
      const page = await client.listPlants({ after: low - 1n, limit: 2 })
      assert.deepEqual(page.plants, [
        { id: low, name: 'two to the 53' },
        { id: high, name: 'one past it' },
      ])
      await client.deletePlant(high)
      assert.deepEqual(await client.getPlant(low), { id: low, name: 'two to the 53' })
      await assert.rejects(client.getPlant(high), { name: 'PlantStoreError', status: 404, code: 'NOT_FOUND' })
      await client.deletePlant(low)
    })

    it('refuses an id outside int64 before sending anything', async () => {
      await assert.rejects(client.getPlant(INT64_MAX + 1n), RangeError)
      await assert.rejects(client.createPlant({ id: INT64_MIN - 1n, name: 'x' }), RangeError)
    })

    it('walks 2,500 plants page by page with Link: rel="next", each once and in order', async () => {
      const ids = Array.from({ length: 2500 }, (_, i) => 1_000_000_000_000_000n + BigInt(i) * 7n)
      // Sent 100 at a time: the service group-commits creates that arrive together.
      for (let i = 0; i < ids.length; i += 100) {
        await Promise.all(
          ids.slice(i, i + 100).map((id) => client.createPlant({ id, name: `p${id}`, tag: 'many' })),
        )
      }
      const first = await client.listPlants({ tag: 'many', limit: 1000 })
      assert.equal(first.plants.length, 1000)
      assert.match(first.next ?? '', new RegExp(`after=${ids[999]}&`))
      const seen: bigint[] = []
      for await (const plant of client.allPlants({ tag: 'many', limit: 1000 })) {
        assert.equal(plant.name, `p${plant.id}`)
        seen.push(plant.id)
      }
      assert.deepEqual(seen, ids)
      const small: bigint[] = []
      for await (const plant of client.allPlants({ tag: 'many', limit: 999, after: ids[2400] }))
        small.push(plant.id)
      assert.deepEqual(small, ids.slice(2401))
    })
  })
}
