import type { PlantLines } from '../storage.js'
import { plantJson } from '../plant-json.js'
import type { Guarded } from './create-plants.js'
import type { PgSql } from './migrations.js'
import { toPlant } from './rows.js'

/** One page of plants for `plant-store export`, by ascending id (see Storage.exportPlants). */
export async function exportPlants(
  sql: PgSql,
  guarded: Guarded,
  after: bigint | undefined,
  limit: number,
): Promise<PlantLines> {
  const rows = await guarded(
    () => sql`SELECT id, name, tag FROM plants
      WHERE ${after === undefined ? sql`TRUE` : sql`id > ${after}`} ORDER BY id LIMIT ${limit}`,
  )
  const plants = rows.map(toPlant)
  return { lines: plants.map(plantJson), lastId: plants.at(-1)?.id }
}

/** Failed deliveries back to pending, due at `now` (see Storage.requeueFailedDeliveries). */
export async function requeueFailedDeliveries(
  sql: PgSql,
  guarded: Guarded,
  ids: readonly string[] | undefined,
  now: Date,
): Promise<string[]> {
  const rows = await guarded(
    () => sql`UPDATE webhook_deliveries d
      SET status = 'pending', next_attempt_at = ${now}, lease_owner = NULL, lease_until = NULL
      WHERE d.status = 'failed'
        AND EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = d.subscription_id)
        AND ${ids === undefined ? sql`TRUE` : sql`d.id = ANY(${sql.array([...ids], 25)}::text[])`}
      RETURNING d.id`,
  )
  return rows.map((row) => row.id as string)
}
