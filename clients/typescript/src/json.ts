import { isInteger, LosslessNumber, parse } from 'lossless-json'
import { plantFields } from './generated/openapi.js'
import type { NewPlant, Plant, StoredPlant } from './types.js'

const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n

/** Throws a RangeError unless `id` is an int64, the only ids the service has. */
export function checkId(id: bigint, what = 'id'): bigint {
  if (typeof id !== 'bigint') throw new TypeError(`${what} must be a bigint, got ${typeof id}`)
  if (id < INT64_MIN || id > INT64_MAX) throw new RangeError(`${what} must be an int64, got ${id}`)
  return id
}

type Fields = Record<string, unknown>

/**
 * The JSON body of a create, the id written digit for digit (JSON.stringify cannot print a bigint),
 * then the document's Plant fields in order, an absent optional one left out.
 */
export function newPlantJson(plant: NewPlant): string {
  let json = `{"id":${checkId(plant.id).toString()}`
  for (const { name, required } of plantFields) {
    const value = (plant as unknown as Fields)[name]
    if (required || value !== undefined) json += `,"${name}":${JSON.stringify(value)}`
  }
  return `${json}}`
}

/** The Plant fields of an answer that has them; answers are checked by the caller. */
export function toPlant(value: object): Plant {
  const plant: Fields = {}
  for (const { name } of plantFields) {
    const field = (value as Fields)[name]
    if (field !== undefined) plant[name] = field
  }
  return plant as unknown as Plant
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
  if (
    !isObject(value) ||
    plantFields.some(({ name, required }) => required && typeof value[name] !== 'string')
  )
    throw new TypeError(`${what} is not a plant: expected an object with a ${REQUIRED}`)
  const plant: Fields = { id: exactInteger(value.id, `${what}.id`) }
  for (const { name } of plantFields) if (typeof value[name] === 'string') plant[name] = value[name]
  return plant as unknown as StoredPlant
}

const REQUIRED = plantFields
  .filter((field) => field.required)
  .map((field) => field.name)
  .join(' and ')
