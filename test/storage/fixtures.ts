/** Shared by the parts of the storage contract (`contract.ts`, `contract-webhooks.ts`). */
import assert from 'node:assert/strict'
import { parse, parseNumberAndBigInt } from 'lossless-json'
import type { ListQuery, Plant, Storage } from '../../src/storage/storage.js'

/** What each part of the contract gets: the store under test and a way to open a second one. */
export interface ContractContext {
  /** The store under test; empty at the start of every test. */
  store(): Storage
  /** Another instance on the same data, as a second process would have; closed after the test. */
  another(): Promise<Storage>
}

/** A plant value; an absent tag is an absent key, as the adapters return it. */
export function plant(id: bigint, name: string, tag?: string): Plant {
  return tag === undefined ? { id, name } : { id, name, tag }
}

/** The exact webhook payload a store writes for the plant (ids printed digit for digit). */
export function payloadOf(p: Plant): string {
  const tag = p.tag === undefined ? '' : `,"tag":${JSON.stringify(p.tag)}`
  return `{"id":${p.id},"name":${JSON.stringify(p.name)}${tag}}`
}

/** Creates the plant. */
export const create = (store: Storage, p: Plant) => store.createPlant(p)

/** A fixed instant plus `ms`, for records whose times the test chooses. */
export const at = (ms: number) => new Date(Date.parse('2030-01-01T00:00:00.000Z') + ms)

/** The store's JSON text of plants, read back with exact (BigInt) ids. */
const parsePlants = (json: string) => parse(json, undefined, parseNumberAndBigInt) as Plant | Plant[]

/** One plant through the adapter's JSON read, the text GET /plants/{id} sends. */
export async function readPlant(store: Storage, id: bigint): Promise<Plant | undefined> {
  const json = await store.readPlantJson(id)
  return json === undefined ? undefined : (parsePlants(json) as Plant)
}

/** One page through the adapter's JSON listing; checks that its cursor is the page's last id. */
export async function listPlants(store: Storage, query: ListQuery): Promise<Plant[]> {
  const page = await store.listPlantsJson(query)
  const plants = parsePlants(page.json) as Plant[]
  assert.ok(Array.isArray(plants), page.json)
  assert.equal(page.lastId, plants.at(-1)?.id, 'lastId is the id of the last plant on the page')
  if (plants.length < query.limit) assert.equal(page.more, false, 'a short page is the last one')
  return plants
}
