import { type PlantField, plantFields } from '../../schemas/plant.js'
import { plantJsonSql as jsonSql } from '../plant-json.js'

/**
 * The plant in the row `alias` as the API's JSON text (see plant-json.ts), built by PostgreSQL:
 * to_json escapes a string as JSON.stringify does, and an int8 prints exactly. Reads return it (one
 * text column per plant or page is far less to parse than a typed column per field), and creates
 * store it as the webhook payload.
 */
export const plantJsonSql = (alias: string, fields: readonly PlantField[] = plantFields) =>
  jsonSql((column) => `to_json(${column})`, alias, fields)
