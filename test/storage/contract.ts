import assert from 'node:assert/strict'
import { afterEach, beforeEach, describe, it } from 'node:test'
import type { ListQuery, Plant, Storage, TokenRecord } from '../../src/storage/storage.js'
import { dataMovesContract } from './contract-data-moves.js'
import { webhookContract } from './contract-webhooks.js'
import { at, type ContractContext, create, listPlants, plant, readPlant } from './fixtures.js'

/**
 * The storage contract: every adapter must pass it unchanged. `open` returns an instance on the
 * store under test; `reset` empties that store and is called before every test (with no open
 * instance). Without `reset`, `open` itself must return an empty store each time it is called,
 * which rules out the tests that open a second instance on the same data.
 */
export function storageContract(
  name: string,
  open: () => Promise<Storage>,
  reset?: () => Promise<void>,
): void {
  describe(`storage contract: ${name}`, () => {
    let current: Storage | undefined
    const others: Storage[] = []
    const ctx: ContractContext = {
      store: () => {
        assert.ok(current, 'no open store')
        return current
      },
      another: async () => {
        const other = await open()
        others.push(other)
        return other
      },
    }

    beforeEach(async () => {
      await reset?.()
      current = await open()
    })
    afterEach(async () => {
      const open = [current, ...others.splice(0)].filter((s): s is Storage => s !== undefined)
      current = undefined
      await Promise.all(open.map((s) => s.close()))
    })

    plantContract(ctx)
    tokenContract(ctx)
    webhookContract(ctx)
    dataMovesContract(ctx)
    concurrencyContract(ctx)

    describe('lifecycle', () => {
      it('names its kind and answers ping', async () => {
        assert.equal(typeof ctx.store().kind, 'string')
        assert.equal(await ctx.store().ping(), undefined)
      })

      it('a second instance on the same store sees the data and re-migrates nothing destructive', async () => {
        assert.equal((await create(ctx.store(), plant(7n, 'fern'))).kind, 'created')
        const other = await ctx.another()
        assert.deepEqual(await readPlant(other, 7n), plant(7n, 'fern'))
        assert.equal((await create(other, plant(7n, 'fern'))).kind, 'replayed')
      })
    })
  })
}

function plantContract(ctx: ContractContext): void {
  describe('plants', () => {
    it('creates a plant and reads it back, with and without a tag', async () => {
      const s = ctx.store()
      assert.deepEqual(await create(s, plant(1n, 'fern', 'green')), { kind: 'created' })
      assert.deepEqual(await create(s, plant(2n, 'cactus')), { kind: 'created' })
      assert.deepEqual(await readPlant(s, 1n), plant(1n, 'fern', 'green'))
      const untagged = await readPlant(s, 2n)
      assert.deepEqual(untagged, plant(2n, 'cactus'))
      assert.ok(untagged && !('tag' in untagged), 'an absent tag is an absent key, not undefined or null')
    })

    it('replays an identical create', async () => {
      const s = ctx.store()
      await create(s, plant(1n, 'fern', 'green'))
      await create(s, plant(2n, 'cactus'))
      assert.deepEqual(await create(s, plant(1n, 'fern', 'green')), { kind: 'replayed' })
      assert.deepEqual(await create(s, plant(2n, 'cactus')), { kind: 'replayed' })
    })

    it('reports a conflict with the stored plant when the body differs', async () => {
      const s = ctx.store()
      await create(s, plant(1n, 'fern', 'green'))
      await create(s, plant(2n, 'cactus'))
      const stored1 = { kind: 'conflict', existing: plant(1n, 'fern', 'green') }
      const stored2 = { kind: 'conflict', existing: plant(2n, 'cactus') }
      assert.deepEqual(await create(s, plant(1n, 'palm', 'green')), stored1)
      assert.deepEqual(await create(s, plant(1n, 'fern', 'blue')), stored1)
      assert.deepEqual(await create(s, plant(1n, 'fern')), stored1, 'removing the tag is a conflict')
      assert.deepEqual(await create(s, plant(2n, 'cactus', 'spiky')), stored2, 'adding a tag is a conflict')
      assert.deepEqual(await readPlant(s, 1n), plant(1n, 'fern', 'green'), 'a conflict changes nothing')
    })

    it('gives each create of one group commit its own outcome, whatever its place in it', async () => {
      const s = ctx.store()
      await create(s, plant(2n, 'cactus'))
      await create(s, plant(4n, 'fern', 'green'))
      // Submitted in one turn of the event loop, so they travel in one batch.
      const outcomes = await Promise.all([
        create(s, plant(5n, 'palm')),
        create(s, plant(4n, 'fern')),
        create(s, plant(1n, 'ivy', 'tall')),
        create(s, plant(2n, 'cactus')),
        create(s, plant(3n, 'moss')),
        create(s, plant(4000000000000000000n, 'oak')),
      ])
      assert.deepEqual(outcomes, [
        { kind: 'created' },
        { kind: 'conflict', existing: plant(4n, 'fern', 'green') },
        { kind: 'created' },
        { kind: 'replayed' },
        { kind: 'created' },
        { kind: 'created' },
      ])
      assert.deepEqual(await readPlant(s, 1n), plant(1n, 'ivy', 'tall'))
      assert.deepEqual(await readPlant(s, 4000000000000000000n), plant(4000000000000000000n, 'oak'))
    })

    it('round-trips int64 edges exactly', async () => {
      const s = ctx.store()
      const ids = [9007199254740992n, 9007199254740993n, 9223372036854775807n, -9223372036854775808n, 0n, -1n]
      for (const id of ids)
        assert.deepEqual(await create(s, plant(id, `p${id}`)), { kind: 'created' }, `create ${id}`)
      for (const id of ids) {
        const got = await readPlant(s, id)
        assert.equal(typeof got?.id, 'bigint')
        assert.deepEqual(got, plant(id, `p${id}`))
      }
      const sorted = [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
      assert.deepEqual(
        (await listPlants(s, { limit: 100 })).map((p) => p.id),
        sorted,
      )
      assert.deepEqual(
        (await listPlants(s, { limit: 100, after: -9223372036854775808n })).map((p) => p.id),
        sorted.slice(1),
      )
      assert.deepEqual(await listPlants(s, { limit: 100, after: 9223372036854775807n }), [])
      assert.equal(await s.deletePlant(9007199254740993n), true)
      assert.deepEqual(await readPlant(s, 9007199254740992n), plant(9007199254740992n, 'p9007199254740992'))
    })

    it('returns undefined for a missing plant and false for deleting one', async () => {
      assert.equal(await readPlant(ctx.store(), 404n), undefined)
      assert.equal(await ctx.store().deletePlant(404n), false)
    })

    it('lists in id order with after, tag and limit', async () => {
      const s = ctx.store()
      for (const [id, tag] of [
        [5n, 'a'],
        [3n, 'b'],
        [9n, 'a'],
        [1n, undefined],
        [7n, 'a'],
      ] as const) {
        await create(s, plant(id, `p${id}`, tag))
      }
      const ids = async (q: ListQuery) => (await listPlants(s, q)).map((p) => p.id)
      assert.deepEqual(await ids({ limit: 10 }), [1n, 3n, 5n, 7n, 9n])
      assert.deepEqual(await ids({ limit: 2 }), [1n, 3n])
      assert.deepEqual(await ids({ limit: 10, after: 3n }), [5n, 7n, 9n])
      assert.deepEqual(await ids({ limit: 10, after: 4n }), [5n, 7n, 9n])
      assert.deepEqual(await ids({ limit: 10, tag: 'a' }), [5n, 7n, 9n])
      assert.deepEqual(await ids({ limit: 1, tag: 'a', after: 5n }), [7n])
      assert.deepEqual(await ids({ limit: 10, tag: 'none' }), [])
      assert.deepEqual(await listPlants(s, { limit: 1, tag: 'b' }), [plant(3n, 'p3', 'b')])
      assert.deepEqual(await listPlants(s, { limit: 1, after: 0n }), [plant(1n, 'p1')])
    })

    it('says whether more plants follow a full page, with and without a tag', async () => {
      const s = ctx.store()
      for (const id of [1n, 2n, 3n, 4n])
        await create(s, plant(id, `p${id}`, id % 2n === 0n ? 'even' : undefined))
      const more = async (q: ListQuery) => (await s.listPlantsJson(q)).more
      assert.equal(await more({ limit: 3 }), true)
      assert.equal(await more({ limit: 4 }), false, 'a full page that ends the table')
      assert.equal(await more({ limit: 1, after: 3n }), false)
      assert.equal(await more({ limit: 1, tag: 'even' }), true)
      assert.equal(await more({ limit: 2, tag: 'even' }), false)
      assert.equal(await more({ limit: 1, tag: 'even', after: 2n }), false)
      assert.deepEqual(await s.listPlantsJson({ limit: 5, after: 4n }), {
        json: '[]',
        lastId: undefined,
        more: false,
      })
    })

    it('reads names and tags back as exact JSON text, whatever characters they hold', async () => {
      const s = ctx.store()
      const names = [
        'quote " back \\ slash',
        'tab\tnew\nline\u0001\u001f\u007f',
        'ünïcødé 🌱 \u2028 </script>',
        "it's",
      ]
      for (const [i, name] of names.entries()) await create(s, plant(BigInt(i), name, name))
      for (const [i, name] of names.entries()) {
        const json = await s.readPlantJson(BigInt(i))
        assert.deepEqual(JSON.parse(json ?? 'null'), { id: i, name, tag: name }, json)
      }
      const page = await s.listPlantsJson({ limit: 10 })
      assert.deepEqual(
        JSON.parse(page.json),
        names.map((name, id) => ({ id, name, tag: name })),
        page.json,
      )
    })

    it("never answers a repeated listing from before a write, its own or another instance's", async () => {
      const s = ctx.store()
      const ids = async () => (await listPlants(s, { limit: 10 })).map((p) => p.id)
      await create(s, plant(1n, 'fern'))
      assert.deepEqual(await ids(), [1n])
      assert.deepEqual(await ids(), [1n], 'asked twice, unchanged')
      await create(s, plant(2n, 'palm'))
      assert.deepEqual(await ids(), [1n, 2n], 'a create shows in the next listing')
      await s.deletePlant(1n)
      assert.deepEqual(await ids(), [2n], 'a delete shows in the next listing')
      const other = await ctx.another()
      await create(other, plant(3n, 'moss'))
      assert.deepEqual(await ids(), [2n, 3n], "another instance's create shows too")
    })

    it("never answers a repeated read by id from before a write, its own or another instance's", async () => {
      const s = ctx.store()
      await create(s, plant(1n, 'fern', 'a'))
      assert.deepEqual(await readPlant(s, 1n), plant(1n, 'fern', 'a'))
      assert.deepEqual(await readPlant(s, 1n), plant(1n, 'fern', 'a'), 'asked twice, unchanged')
      assert.equal(await s.deletePlant(1n), true)
      assert.equal(await readPlant(s, 1n), undefined, 'a delete shows in the next read')
      await create(s, plant(1n, 'moss'))
      assert.deepEqual(await readPlant(s, 1n), plant(1n, 'moss'), 'a create again shows in the next read')
      const other = await ctx.another()
      assert.deepEqual(await readPlant(other, 1n), plant(1n, 'moss'))
      assert.equal(await other.deletePlant(1n), true)
      assert.equal(await readPlant(s, 1n), undefined, "another instance's delete shows too")
      await create(other, plant(1n, 'palm', 'b'))
      assert.deepEqual(await readPlant(s, 1n), plant(1n, 'palm', 'b'), "another instance's create shows too")
    })

    it('pages through every plant exactly once', async () => {
      const s = ctx.store()
      const all: Plant[] = []
      for (let i = 0; i < 45; i++) {
        const id = BigInt(i * 7919 - 150_000) * 1_000_000_007n
        all.push(plant(id, `p${i}`, i % 3 === 0 ? 'x' : undefined))
      }
      for (const p of all) await create(s, p)
      const byId = (a: Plant, b: Plant) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
      for (const tag of [undefined, 'x']) {
        const seen: Plant[] = []
        let after: bigint | undefined
        for (;;) {
          const page = await listPlants(s, { limit: 7, after, tag })
          seen.push(...page)
          if (page.length < 7) break
          after = page[page.length - 1]?.id
        }
        assert.deepEqual(seen, all.filter((p) => tag === undefined || p.tag === tag).sort(byId))
      }
    })

    it('deletes a plant, after which the id can be created afresh', async () => {
      const s = ctx.store()
      await create(s, plant(1n, 'fern'))
      assert.equal(await s.deletePlant(1n), true)
      assert.equal(await readPlant(s, 1n), undefined)
      assert.equal(await s.deletePlant(1n), false)
      assert.deepEqual(await create(s, plant(1n, 'palm', 'new')), { kind: 'created' })
      assert.deepEqual(await readPlant(s, 1n), plant(1n, 'palm', 'new'))
    })
  })
}

function token(id: string, overrides: Partial<TokenRecord> = {}): TokenRecord {
  return {
    id,
    name: `token ${id}`,
    scopes: ['plants:read', 'plants:write'],
    hash: `${id}`.padStart(64, '0'),
    createdAt: at(0),
    expiresAt: null,
    lastUsedAt: null,
    revokedAt: null,
    ...overrides,
  }
}

function tokenContract(ctx: ContractContext): void {
  describe('tokens', () => {
    it('stores a token and finds it by hash', async () => {
      const s = ctx.store()
      const full = token('a1', {
        scopes: ['admin'],
        expiresAt: at(86_400_123),
        lastUsedAt: at(5),
        createdAt: at(1),
      })
      const bare = token('b2', { scopes: [] })
      await s.createToken(full)
      await s.createToken(bare)
      assert.deepEqual(await s.findTokenByHash(full.hash), full)
      assert.deepEqual(await s.findTokenByHash(bare.hash), bare)
      assert.equal(await s.findTokenByHash('f'.repeat(64)), undefined)
    })

    it('rejects a second token with the same hash or id', async () => {
      const s = ctx.store()
      await s.createToken(token('a1'))
      await assert.rejects(s.createToken(token('a2', { hash: token('a1').hash })))
      await assert.rejects(s.createToken(token('a1', { hash: 'e'.repeat(64) })))
    })

    it('lists tokens by creation time, then id', async () => {
      const s = ctx.store()
      await s.createToken(token('c', { createdAt: at(2) }))
      await s.createToken(token('b', { createdAt: at(1) }))
      await s.createToken(token('a', { createdAt: at(2) }))
      await s.createToken(token('B', { createdAt: at(2) }))
      // Ties are broken bytewise ('B' < 'a'), whatever the database's locale.
      assert.deepEqual(
        (await s.listTokens()).map((t) => t.id),
        ['b', 'B', 'a', 'c'],
      )
    })

    it('revokes once', async () => {
      const s = ctx.store()
      await s.createToken(token('a1'))
      const before = Date.now()
      assert.equal(await s.revokeToken('a1'), true)
      assert.equal(await s.revokeToken('a1'), false)
      assert.equal(await s.revokeToken('missing'), false)
      const revokedAt = (await s.findTokenByHash(token('a1').hash))?.revokedAt
      assert.ok(revokedAt instanceof Date && revokedAt.getTime() >= before - 1000, 'revokedAt is set to now')
    })

    it('records the last use', async () => {
      const s = ctx.store()
      await s.createToken(token('a1'))
      await s.touchToken('a1', at(42))
      assert.deepEqual((await s.findTokenByHash(token('a1').hash))?.lastUsedAt, at(42))
      await s.touchToken('missing', at(43))
    })

    it('counts only tokens neither revoked nor expired', async () => {
      const s = ctx.store()
      assert.equal(await s.countUsableTokens(at(1000)), 0)
      await s.createToken(token('forever'))
      await s.createToken(token('future', { expiresAt: at(1001) }))
      await s.createToken(token('now', { expiresAt: at(1000) }))
      await s.createToken(token('past', { expiresAt: at(999) }))
      await s.createToken(token('revoked'))
      await s.revokeToken('revoked')
      assert.equal(await s.countUsableTokens(at(1000)), 2)
      assert.equal(await s.countUsableTokens(at(0)), 4)
    })
  })
}

function concurrencyContract(ctx: ContractContext): void {
  describe('concurrent creates of one id', () => {
    const spread = async (n: number, body: (i: number) => Plant) => {
      const stores = [ctx.store(), await ctx.another()]
      await ctx
        .store()
        .addSubscription({ id: 'sub', url: 'https://example.test/h', secret: 's', createdAt: at(0) })
      const outcomes = await Promise.all(
        Array.from({ length: n }, (_, i) => create(stores[i % stores.length] as Storage, body(i))),
      )
      return outcomes.map((o) => o.kind)
    }

    it('identical bodies: exactly one created, the rest replayed, one delivery', async () => {
      const kinds = await spread(50, () => plant(4242n, 'fern', 'green'))
      assert.equal(kinds.filter((k) => k === 'created').length, 1)
      assert.equal(kinds.filter((k) => k === 'replayed').length, 49)
      assert.equal((await ctx.store().listDeliveries({ failedOnly: false, limit: 100 })).length, 1)
    })

    it('mixed bodies: exactly one created, the others replayed or conflicting with the winner', async () => {
      const bodies = (i: number) => plant(4243n, i % 2 ? 'odd' : 'even', i % 5 === 0 ? 'five' : undefined)
      const kinds = await spread(50, bodies)
      assert.equal(kinds.filter((k) => k === 'created').length, 1)
      const winner = await readPlant(ctx.store(), 4243n)
      assert.ok(winner)
      for (const [i, kind] of kinds.entries()) {
        if (kind === 'created') continue
        const body = bodies(i)
        const same: boolean = body.name === winner.name && body.tag === winner.tag
        assert.equal(kind, same ? 'replayed' : 'conflict', `request ${i}`)
      }
      assert.equal((await ctx.store().listDeliveries({ failedOnly: false, limit: 100 })).length, 1)
    })

    // A create that met a row which was deleted before it could be read used to retry, and after
    // five such losses failed its whole batch: unrelated creates, stored, were answered 500.
    it('creates racing deletes of their id always get an outcome, and so do creates batched with them', async () => {
      const stores = [ctx.store(), await ctx.another()]
      const hot = 4244n
      const until = Date.now() + 3000
      const kinds = new Map<string, number>()
      let unrelated = 5000n
      const loop = async (work: () => Promise<void>) => {
        while (Date.now() < until) await work()
      }
      await Promise.all([
        ...Array.from({ length: 12 }, (_, w) =>
          loop(async () => {
            const outcome = await create(stores[w % 2] as Storage, plant(hot, w % 4 < 2 ? 'a' : 'b'))
            kinds.set(outcome.kind, (kinds.get(outcome.kind) ?? 0) + 1)
            if (outcome.kind === 'conflict') assert.notEqual(outcome.existing.name, w % 4 < 2 ? 'a' : 'b')
          }),
        ),
        ...Array.from({ length: 12 }, (_, w) =>
          loop(async () => {
            await (stores[w % 2] as Storage).deletePlant(hot)
          }),
        ),
        ...Array.from({ length: 4 }, (_, w) =>
          loop(async () => {
            const id = unrelated++
            assert.equal((await create(stores[w % 2] as Storage, plant(id, 'other'))).kind, 'created')
            assert.deepEqual(await readPlant(stores[(w + 1) % 2] as Storage, id), plant(id, 'other'))
          }),
        ),
      ])
      assert.ok((kinds.get('created') ?? 0) > 0, JSON.stringify([...kinds]))
    })
  })
}
