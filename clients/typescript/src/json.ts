import { isInteger, LosslessNumber, parse } from 'lossless-json'
import type { NewPlant, StoredPlant } from './types.js'

const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n

/** Throws a RangeError unless `id` is an int64, the only ids the service has. */
export function checkId(id: bigint, what = 'id'): bigint {
  if (typeof id !== 'bigint') throw new TypeError(`${what} must be a bigint, got ${typeof id}`)
  if (id < INT64_MIN || id > INT64_MAX) throw new RangeError(`${what} must be an int64, got ${id}`)
  return id
}

/** The JSON body of a create, the id written digit for digit (JSON.stringify cannot print a bigint). */
export function newPlantJson(plant: NewPlant): string {
  let json = `{"id":${checkId(plant.id).toString()},"name":${JSON.stringify(plant.name)}`
  if (plant.tag !== undefined) json += `,"tag":${JSON.stringify(plant.tag)}`
  return `${json}}`
}

/** Parses JSON text keeping every number as its digits (LosslessNumber); nothing is rounded. */
export function parseLossless(text: string): unknown {
  return parse(text)
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** The exact bigint of a JSON integer read by parseLossless. */
export function exactInteger(value: unknown, what: string): bigint {
  if (value instanceof LosslessNumber && isInteger(value.value)) return BigInt(value.value)
  throw new TypeError(`${what} is not an integer`)
}

/** A stored plant (or a NewPlant) from a parsed answer, its id exact. */
export function toStoredPlant(value: unknown, what = 'plant'): StoredPlant {
  if (!isObject(value) || typeof value.name !== 'string')
    throw new TypeError(`${what} is not a plant: expected an object with a name`)
  const plant: StoredPlant = { id: exactInteger(value.id, `${what}.id`), name: value.name }
  if (typeof value.tag === 'string') plant.tag = value.tag
  return plant
}
