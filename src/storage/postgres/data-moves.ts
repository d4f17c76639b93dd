import type { PlantLines } from '../storage.js'
import { plantColumns, toPlant } from '../plant-fields.js'
import { plantJson } from '../plant-json.js'
import type { Row } from './rows.js'

/** Runs one statement through the adapter's guard and answers its rows. */
export type RunRows = (text: string, values: unknown[]) => Promise<Row[]>

/** One page of plants for `plant-store export`, by ascending id (see Storage.exportPlants). */
export async function exportPlants(
  rows: RunRows,
  after: bigint | undefined,
  limit: number,
): Promise<PlantLines> {
  // A NULL cursor starts at the first plant, so one prepared statement serves every page.
  const found = await rows(
    `SELECT id, ${plantColumns} FROM plants WHERE $1::int8 IS NULL OR id > $1 ORDER BY id LIMIT $2`,
    [after ?? null, limit],
  )
  const plants = found.map(toPlant)
  return { lines: plants.map(plantJson), lastId: plants.at(-1)?.id }
}

/** Failed deliveries back to pending, due at `now` (see Storage.requeueFailedDeliveries). */
export async function requeueFailedDeliveries(
  rows: RunRows,
  ids: readonly string[] | undefined,
  now: Date,
): Promise<string[]> {
  const requeued = await rows(
    `UPDATE webhook_deliveries d
      SET status = 'pending', next_attempt_at = $1, lease_owner = NULL, lease_until = NULL
      WHERE d.status = 'failed'
        AND EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = d.subscription_id)
        AND ($2::text[] IS NULL OR d.id = ANY($2::text[]))
      RETURNING d.id`,
    [now, ids === undefined ? null : [...ids]],
  )
  return requeued.map((row) => row.id as string)
}
