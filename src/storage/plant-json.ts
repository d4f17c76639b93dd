import type { Plant } from './storage.js'

/**
 * A plant as the API's JSON text: `{"id":<digits>,"name":"...","tag":"..."}`, the id printed
 * exactly, `tag` left out when absent. The webhook payload, the PostgreSQL adapter's reads and
 * the SQLite adapter's SQL (PLANT_JSON there) all produce this form.
 */
export function plantJson(plant: Plant): string {
  const tag = plant.tag === undefined ? '' : `,"tag":${JSON.stringify(plant.tag)}`
  return `{"id":${plant.id},"name":${JSON.stringify(plant.name)}${tag}}`
}
