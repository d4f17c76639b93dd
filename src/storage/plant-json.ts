import { type PlantField, plantFields } from '../schemas/plant.js'
import type { Plant } from './storage.js'

/**
 * A plant as the API's JSON text: `{"id":<digits>,"name":"...","tag":"..."}`, the id printed
 * exactly, then the declared fields in order, an absent one left out. The webhook payload, the
 * PostgreSQL adapter's exports and both stores' SQL (plantJsonSql) all produce this form.
 */
export function plantJsonFor(fields: readonly PlantField[]): (plant: Plant) => string {
  return (plant) => {
    const record = plant as unknown as Record<string, string | undefined>
    let json = `{"id":${plant.id}`
    for (const { name } of fields) {
      const value = record[name]
      if (value !== undefined) json += `,"${name}":${JSON.stringify(value)}`
    }
    return `${json}}`
  }
}

export const plantJson = plantJsonFor(plantFields)

/**
 * The same text built by the database from a plant row, so reads need not parse rows into objects:
 * `quote` is the store's JSON string quoting (SQLite's json_quote, PostgreSQL's to_json), which
 * escapes as JSON.stringify does, and an integer id prints exactly in both. `alias.` prefixes each
 * column when given.
 */
export function plantJsonSql(
  quote: (column: string) => string,
  alias?: string,
  fields: readonly PlantField[] = plantFields,
): string {
  const column = (name: string) => (alias === undefined ? name : `${alias}.${name}`)
  const members = fields.map(({ name, required }) => {
    const member = `',"${name}":' || ${quote(column(name))}`
    return required ? `${member} ||` : `CASE WHEN ${column(name)} IS NULL THEN '' ELSE ${member} END ||`
  })
  return `'{"id":' || ${column('id')} || ${members.join(' ')} '}'`
}
