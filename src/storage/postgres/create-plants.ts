import type { CreateOutcome } from '../storage.js'
import type { CreateRequest } from './create-batcher.js'
import type { PgSql } from './migrations.js'
import { toPlant } from './rows.js'

/** Runs a statement under the store's deadline, reachability and dead-connection retry. */
export type Guarded = <T>(work: () => Promise<T>) => Promise<T>

/**
 * One batch of creates (see CreateBatcher), in one statement and so one transaction: the plants
 * and their outbox rows commit together. Rows go in ascending id order, so two batches that
 * share ids (two instances, say) wait for each other in the same order and never deadlock. An
 * insert colliding with an uncommitted row waits for that transaction; so when an id is
 * reported "not inserted", the winner has committed and the SELECT after it (a new snapshot)
 * sees that row.
 */
export async function createPlants(
  sql: PgSql,
  batch: CreateRequest[],
  guarded: Guarded,
): Promise<CreateOutcome[]> {
  const outcomes: (CreateOutcome | undefined)[] = batch.map(() => undefined)
  // Repeats only for ids whose colliding row was deleted before we read it; then they are ours.
  for (let attempt = 0; attempt < 5; attempt++) {
    const open = batch.flatMap((request, i) => (outcomes[i] ? [] : [{ ...request, i }]))
    if (open.length === 0) return outcomes as CreateOutcome[]
    const now = new Date()
    const inserted = await guarded(
      () => sql`WITH input AS (
          SELECT * FROM unnest(
            ${open.map((r) => String(r.plant.id))}::int8[], ${open.map((r) => r.plant.name)}::text[],
            ${open.map((r) => r.plant.tag ?? null)}::text[], ${open.map((r) => r.payload)}::text[]
          ) AS t(id, name, tag, payload)
        ), inserted AS (
          INSERT INTO plants (id, name, tag, created_at)
          SELECT id, name, tag, ${now} FROM input ORDER BY id
          ON CONFLICT (id) DO NOTHING
          RETURNING id
        ), enqueued AS (
          INSERT INTO webhook_deliveries
            (id, subscription_id, plant_id, payload, status, attempts, next_attempt_at, created_at)
          SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), s.id, i.id, input.payload,
                 'pending', 0, ${now}, ${now}
          FROM inserted i JOIN input USING (id)
          CROSS JOIN (SELECT id FROM webhook_subscriptions FOR KEY SHARE) s
        )
        SELECT id FROM inserted`,
    )
    const created = new Set(inserted.map((row) => row.id as bigint))
    const taken = open.filter((r) => !created.has(r.plant.id))
    for (const r of open) if (created.has(r.plant.id)) outcomes[r.i] = { kind: 'created' }
    if (taken.length === 0) continue
    const rows = await guarded(
      () => sql`SELECT id, name, tag FROM plants
        WHERE id = ANY(${taken.map((r) => String(r.plant.id))}::int8[])`,
    )
    const stored = new Map(rows.map((row) => [row.id as bigint, toPlant(row)]))
    for (const r of taken) {
      const existing = stored.get(r.plant.id)
      if (!existing) continue
      const same = existing.name === r.plant.name && existing.tag === r.plant.tag
      outcomes[r.i] = same ? { kind: 'replayed' } : { kind: 'conflict', existing }
    }
  }
  if (outcomes.every(Boolean)) return outcomes as CreateOutcome[]
  throw new Error('a plant kept being created and deleted concurrently')
}
