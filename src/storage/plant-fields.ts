/**
 * Plants to and from their declared fields (schemas/plant.ts): every projection walks the one list,
 * so a field added there is read, written, compared and answered without more code.
 */
import { type PlantField, type PlantFieldValues, plantFields } from '../schemas/plant.js'
import type { Plant } from './storage.js'

type Fields = Readonly<Record<string, unknown>>

/** One field's column value, an absent field as NULL. */
export const fieldValue = (plant: Plant, name: string): string | null =>
  ((plant as unknown as Fields)[name] as string | undefined) ?? null

/** The projections for a list of fields; the service uses those of the declaration, below. */
export function plantProjections(fields: readonly PlantField[]) {
  // Assigned one by one: a spread or Object.entries on the create path cost microseconds per request.
  const assignFields = (target: Record<string, unknown>, source: object) => {
    for (const { name } of fields) {
      const value = (source as Fields)[name]
      if (value !== undefined && value !== null) target[name] = value
    }
    return target
  }
  const same = (a: Plant, b: Plant, { name }: PlantField) =>
    (a as unknown as Fields)[name] === (b as unknown as Fields)[name]
  return {
    /**
     * The declared fields of `source` that hold a value, in declaration order; others are left out,
     * and so is a field that is undefined or null (a NULL column): a plant leaves it an absent key.
     */
    pickPlantFields: (source: object): PlantFieldValues => assignFields({}, source) as PlantFieldValues,
    /** The plant with this id and the declared fields of `source`, picked as pickPlantFields does. */
    plantOf: (id: bigint, source: object): Plant => assignFields({ id }, source) as unknown as Plant,
    /** A plant row (id and one column per field); a NULL column becomes an absent key. */
    toPlant: (row: Fields): Plant => assignFields({ id: row.id }, row) as unknown as Plant,
    /** The plant's column values in declaration order: what an INSERT binds. */
    plantValues: (plant: Plant): (string | null)[] => fields.map(({ name }) => fieldValue(plant, name)),
    /** True when every field holds the same value: a replay. */
    samePlant: (a: Plant, b: Plant): boolean => fields.every((field) => same(a, b, field)),
    /** The fields whose values differ: the 409's list. */
    differingFields: (a: Plant, b: Plant): string[] =>
      fields.filter((field) => !same(a, b, field)).map(({ name }) => name),
    /** The field columns in declaration order, each named as its field: `name, tag`. */
    plantColumns: fields.map(({ name }) => name).join(', '),
  }
}

export const { pickPlantFields, plantOf, toPlant, plantValues, samePlant, differingFields, plantColumns } =
  plantProjections(plantFields)
