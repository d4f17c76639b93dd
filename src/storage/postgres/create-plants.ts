import type pg from 'pg'
import type { CreateOutcome } from '../storage.js'
import type { CreateRequest } from './create-batcher.js'
import { type PlantField, plantFields } from '../../schemas/plant.js'
import { fieldValue, plantProjections, toPlant } from '../plant-fields.js'
import { plantJsonSql } from './plant-json-sql.js'

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
    ...plantFields.map(({ name }) => batch.map((r) => fieldValue(r.plant, name))),
    new Date(),
  ]
  const { rows } = await guarded(() => pool.query({ name: 'plants-create', text: CREATE_PLANTS, values }))
  const outcomes = batch.map((): CreateOutcome => ({ kind: 'created' }))
  for (const row of rows) {
    const at = (row.n as number) - 1
    const id = (batch[at] as CreateRequest).plant.id
    outcomes[at] = row.replayed
      ? { kind: 'replayed' }
      : { kind: 'conflict', existing: toPlant({ ...row, id }) }
  }
  return outcomes
}

/** `a.f = b.f` for each field, NULLs equal where a field may be absent; joined by AND. */
const sameFields = (a: string, b: string, fields: readonly PlantField[]) =>
  fields
    .map(({ name, required }) => `${a}.${name} ${required ? '=' : 'IS NOT DISTINCT FROM'} ${b}.${name}`)
    .join(' AND ')

/** The negation of sameFields, joined by OR. */
const otherFields = (a: string, b: string, fields: readonly PlantField[]) =>
  fields
    .map(({ name, required }) => `${a}.${name} ${required ? '<>' : 'IS DISTINCT FROM'} ${b}.${name}`)
    .join(' OR ')

/**
 * The batch statement for these fields: $1 the ids, then one text array per field, then the time.
 * Exported for the test that pins it to the declaration.
 */
export function createPlantsSql(fields: readonly PlantField[] = plantFields): string {
  const names = fields.map(({ name }) => name)
  const arrays = names.map((_, at) => `$${at + 2}::text[]`).join(', ')
  const time = `$${names.length + 2}::timestamptz`
  const columns = plantProjections(fields).plantColumns
  const list = (alias: string) => names.map((name) => `${alias}.${name}`).join(', ')
  return `WITH input AS (
    SELECT * FROM unnest($1::int8[], ${arrays}) WITH ORDINALITY AS t(id, ${columns}, n)
  ), written AS (
    INSERT INTO plants AS p (id, ${columns}, created_at)
    SELECT id, ${columns}, ${time} FROM input ORDER BY id
    ON CONFLICT (id) DO UPDATE SET ${names[0]} = p.${names[0]}
      WHERE ${otherFields('p', 'excluded', fields)}
    RETURNING p.id, ${list('p')}
  ), inserted AS (
    SELECT w.id FROM written w JOIN input i USING (id)
    WHERE ${sameFields('w', 'i', fields)}
  ), enqueued AS (
    INSERT INTO webhook_deliveries
      (id, subscription_id, plant_id, payload, status, attempts, next_attempt_at, created_at)
    SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), s.id, i.id, ${plantJsonSql('input', fields)},
           'pending', 0, ${time}, ${time}
    FROM inserted i JOIN input USING (id)
    CROSS JOIN (SELECT id FROM webhook_subscriptions FOR KEY SHARE) s
    WHERE EXISTS (SELECT FROM webhook_subscriptions)
  )
  SELECT i.n::int4 AS n, w.id IS NULL AS replayed, ${list('w')}
  FROM input i LEFT JOIN written w USING (id)
  WHERE w.id IS NULL OR ${otherFields('w', 'i', fields)}`
}

const CREATE_PLANTS = createPlantsSql()
