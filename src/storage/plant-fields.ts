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
  /**
   * The declared fields of `source` that hold a value, in declaration order; others are left out,
   * and so is a field that is undefined or null (a NULL column): a plant leaves it an absent key.
   */
  const pickPlantFields = (source: object): PlantFieldValues => {
    const picked: Record<string, unknown> = {}
    for (const { name } of fields) {
      const value = (source as Fields)[name]
      if (value !== undefined && value !== null) picked[name] = value
    }
    return picked as PlantFieldValues
  }
  return {
    pickPlantFields,
    /** A plant row (id and one column per field); a NULL column becomes an absent key. */
    toPlant: (row: Fields): Plant => ({ id: row.id as bigint, ...pickPlantFields(row) }),
    /** The plant's column values in declaration order: what an INSERT binds. */
    plantValues: (plant: Plant): (string | null)[] => fields.map(({ name }) => fieldValue(plant, name)),
    /** The fields whose values differ: none for a replay of the same plant, the 409's list otherwise. */
    differingFields: (a: Plant, b: Plant): string[] =>
      fields
        .filter(({ name }) => (a as unknown as Fields)[name] !== (b as unknown as Fields)[name])
        .map(({ name }) => name),
    /** The field columns in declaration order, each named as its field: `name, tag`. */
    plantColumns: fields.map(({ name }) => name).join(', '),
  }
}

export const { pickPlantFields, toPlant, plantValues, differingFields, plantColumns } =
  plantProjections(plantFields)
