import type pg from 'pg'
import type { CreateOutcome } from '../storage.js'
import type { CreateRequest } from './create-batcher.js'
import { plantJsonSql } from './plant-json-sql.js'
import { toPlant } from './rows.js'

/** Runs a statement under the store's deadline, reachability and dead-connection retry. */
export type Guarded = <T>(work: () => Promise<T>) => Promise<T>

/**
 * One batch of creates (see CreateBatcher), in one statement and so one transaction: the plants
 * and their outbox rows commit together, and every create gets its outcome from that statement
 * alone. Rows go in ascending id order, so two batches that share ids (two instances, say) wait
 * for each other in the same order and never deadlock. A delivery's payload, the plant's JSON text,
 * is built by PostgreSQL and only for a plant that has subscribers to announce it to; with no
 * subscription at all, the EXISTS is a one-time filter that skips that part of the plan.
 *
 * A row already at an id is locked by the ON CONFLICT DO UPDATE (PostgreSQL waits for, or retries
 * past, a concurrent insert or delete of it) and is "updated", to itself, only when it differs
 * from the create: so `written` holds what it inserted and what it conflicts with, as it was when
 * locked, and a replay is what it lacks. Only the creates that did not insert come back (a replay
 * with no stored row, a conflict with the stored one), by their place in the batch: in the usual
 * batch, of new plants only, that is no row at all. Reading conflicting rows in a second
 * statement instead found, now and then, that a delete had removed them in between; a create
 * racing deletes of its id then retried, and after five such losses failed its whole batch, other
 * creates in it (stored, and announced to webhooks) answered 500.
 */
export async function createPlants(
  pool: pg.Pool,
  batch: CreateRequest[],
  guarded: Guarded,
): Promise<CreateOutcome[]> {
  const values = [
    batch.map((r) => r.plant.id),
    batch.map((r) => r.plant.name),
    batch.map((r) => r.plant.tag ?? null),
    new Date(),
  ]
  const { rows } = await guarded(() => pool.query({ name: 'plants-create', text: CREATE_PLANTS, values }))
  const outcomes = batch.map((): CreateOutcome => ({ kind: 'created' }))
  for (const row of rows) {
    const at = (row.n as number) - 1
    const id = (batch[at] as CreateRequest).plant.id
    outcomes[at] =
      row.name === null
        ? { kind: 'replayed' }
        : { kind: 'conflict', existing: toPlant({ id, name: row.name, tag: row.tag }) }
  }
  return outcomes
}

const CREATE_PLANTS = `WITH input AS (
    SELECT * FROM unnest($1::int8[], $2::text[], $3::text[]) WITH ORDINALITY AS t(id, name, tag, n)
  ), written AS (
    INSERT INTO plants AS p (id, name, tag, created_at)
    SELECT id, name, tag, $4::timestamptz FROM input ORDER BY id
    ON CONFLICT (id) DO UPDATE SET name = p.name
      WHERE p.name <> excluded.name OR p.tag IS DISTINCT FROM excluded.tag
    RETURNING p.id, p.name, p.tag
  ), inserted AS (
    SELECT w.id FROM written w JOIN input i USING (id)
    WHERE w.name = i.name AND w.tag IS NOT DISTINCT FROM i.tag
  ), enqueued AS (
    INSERT INTO webhook_deliveries
      (id, subscription_id, plant_id, payload, status, attempts, next_attempt_at, created_at)
    SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), s.id, i.id, ${plantJsonSql('input')},
           'pending', 0, $4::timestamptz, $4::timestamptz
    FROM inserted i JOIN input USING (id)
    CROSS JOIN (SELECT id FROM webhook_subscriptions FOR KEY SHARE) s
    WHERE EXISTS (SELECT FROM webhook_subscriptions)
  )
  SELECT i.n::int4 AS n, w.name, w.tag
  FROM input i LEFT JOIN written w USING (id)
  WHERE w.id IS NULL OR w.name <> i.name OR w.tag IS DISTINCT FROM i.tag`
