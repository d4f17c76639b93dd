/**
 * Every write the SQLite store makes, as statements prepared once on the write connection. The
 * group-commit writer (`group-commit.ts`) runs them inside its batch transactions.
 */
import type Database from 'better-sqlite3'
import type {
  AttemptResult,
  ClaimRequest,
  CreateOutcome,
  Plant,
  Subscription,
  TokenRecord,
} from '../storage.js'
import { plantFields } from '../../schemas/plant.js'
import { plantColumns, plantValues, samePlant, toPlant } from '../plant-fields.js'
import { plantJson } from '../plant-json.js'
import { RECORDABLE, type Row } from '../rows.js'

/** One write, as the writer runs it. */
export type WriteOp =
  | { op: 'createPlant'; plant: Plant }
  | { op: 'deletePlant'; id: bigint }
  | { op: 'createToken'; token: TokenRecord }
  | { op: 'revokeToken'; id: string; at: number }
  | { op: 'touchToken'; id: string; at: number }
  | { op: 'addSubscription'; subscription: Subscription }
  | { op: 'removeSubscription'; id: string }
  | { op: 'claimDeliveries'; request: ClaimRequest }
  | { op: 'recordAttempt'; result: AttemptResult }
  | { op: 'requeueFailed'; ids: readonly string[] | undefined; now: number }

/** One subscriber's due, unleased deliveries, earliest first. */
export const dueDeliveriesSql = `SELECT * FROM webhook_deliveries
  WHERE subscription_id = ? AND status = 'pending' AND next_attempt_at <= ?
    AND (lease_until IS NULL OR lease_until < ?)
  ORDER BY next_attempt_at LIMIT ?`

/** Failed deliveries back to pending, due now; those of a removed subscription stay failed. */
const REQUEUE = `UPDATE webhook_deliveries
  SET status = 'pending', next_attempt_at = ?, lease_owner = NULL, lease_until = NULL
  WHERE status = 'failed' AND subscription_id IN (SELECT id FROM webhook_subscriptions)`

export function prepareWriteOps(db: Database.Database) {
  const exact = (sql: string) => db.prepare(sql).safeIntegers(true)
  const s = {
    insertPlant: exact(
      `INSERT INTO plants (id, ${plantColumns}, created_at) VALUES (?, ${plantFields.map(() => '?, ').join('')}?)
        ON CONFLICT (id) DO NOTHING`,
    ),
    getPlant: exact(`SELECT id, ${plantColumns} FROM plants WHERE id = ?`),
    anySubscription: db.prepare('SELECT EXISTS (SELECT 1 FROM webhook_subscriptions)').pluck(),
    deletePlant: exact('DELETE FROM plants WHERE id = ?'),
    enqueueDeliveries: exact(`INSERT INTO webhook_deliveries
        (id, subscription_id, plant_id, payload, status, attempts, next_attempt_at, created_at)
      SELECT 'msg_' || lower(hex(randomblob(16))), id, ?, ?, 'pending', 0, ?, ?
      FROM webhook_subscriptions`),
    insertToken:
      db.prepare(`INSERT INTO tokens (id, name, scopes, token_hash, created_at, expires_at, last_used_at, revoked_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
    revokeToken: db.prepare('UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
    touchToken: db.prepare('UPDATE tokens SET last_used_at = ? WHERE id = ?'),
    insertSubscription: db.prepare(
      'INSERT INTO webhook_subscriptions (id, url, secret, created_at) VALUES (?, ?, ?, ?)',
    ),
    deleteSubscription: db.prepare('DELETE FROM webhook_subscriptions WHERE id = ?'),
    // A lease is kept, so that a send in flight still records its attempt (see recordAttempt).
    failSubscriptionDeliveries: db.prepare(`UPDATE webhook_deliveries
      SET status = 'failed', last_error = 'subscription removed'
      WHERE subscription_id = ? AND status = 'pending'`),
    // RECORDABLE takes a delivery whose subscription was removed while its send was in flight too:
    // acknowledged, it was delivered after all; otherwise it stays failed as removed.
    recordAttempt: db.prepare(`UPDATE webhook_deliveries
      SET attempts = attempts + 1, last_attempt_at = @at, last_status = @status,
          last_error = CASE WHEN status = 'pending' OR @outcome = 'delivered' THEN @error ELSE last_error END,
          status = CASE WHEN status = 'pending' OR @outcome = 'delivered' THEN @outcome ELSE status END,
          next_attempt_at = coalesce(@retryAt, next_attempt_at), lease_owner = NULL, lease_until = NULL
      WHERE id = @id AND lease_owner = @owner AND ${RECORDABLE}`),
    // Numbered from the delivery's count, which recordAttempt has just raised.
    insertAttempt: db.prepare(`INSERT INTO webhook_attempts (delivery_id, attempt, at, status, error)
      SELECT id, attempts, ?, ?, ? FROM webhook_deliveries WHERE id = ?`),
    requeueAll: db.prepare(`${REQUEUE} RETURNING id`).pluck(),
    requeueOne: db.prepare(`${REQUEUE} AND id = ? RETURNING id`).pluck(),
    lease: db.prepare('UPDATE webhook_deliveries SET lease_owner = ?, lease_until = ? WHERE id = ?'),
    subscriptions: db.prepare('SELECT id, url, secret FROM webhook_subscriptions'),
    dueFor: exact(dueDeliveriesSql),
  }

  // Whether any webhook subscriber exists, asked once per transaction rather than once per create:
  // while the batch holds the write lock no other connection can change it, and this batch's own
  // subscription writes reset it.
  let subscribed: boolean | undefined

  // Each runs inside the batch's transaction; statements run in arrival order, so two requests
  // for one id in the same batch behave exactly as if they had come one after the other.
  const run: { [K in WriteOp['op']]: (op: Extract<WriteOp, { op: K }>) => unknown } = {
    createPlant: ({ plant }): CreateOutcome => {
      const now = Date.now()
      if (s.insertPlant.run(plant.id, ...plantValues(plant), now).changes === 1) {
        subscribed ??= s.anySubscription.get() === 1
        if (subscribed) s.enqueueDeliveries.run(plant.id, plantJson(plant), now, now)
        return { kind: 'created' }
      }
      const existing = toPlant(s.getPlant.get(plant.id) as Row)
      return samePlant(existing, plant) ? { kind: 'replayed' } : { kind: 'conflict', existing }
    },
    deletePlant: ({ id }) => s.deletePlant.run(id).changes === 1,
    createToken: ({ token: t }) => {
      const time = (d: Date | null) => d?.getTime() ?? null
      s.insertToken.run(
        t.id,
        t.name,
        t.scopes.join(','),
        t.hash,
        t.createdAt.getTime(),
        time(t.expiresAt),
        time(t.lastUsedAt),
        time(t.revokedAt),
      )
    },
    revokeToken: ({ id, at }) => s.revokeToken.run(at, id).changes === 1,
    touchToken: ({ id, at }) => {
      s.touchToken.run(at, id)
    },
    addSubscription: ({ subscription: sub }) => {
      s.insertSubscription.run(sub.id, sub.url, sub.secret, sub.createdAt.getTime())
      subscribed = undefined
    },
    removeSubscription: ({ id }) => {
      subscribed = undefined
      const removed = s.deleteSubscription.run(id).changes === 1
      if (removed) s.failSubscriptionDeliveries.run(id)
      return removed
    },
    // Each subscriber's earliest due deliveries, at most perSubscription of them, from an index
    // range of its own; a saturated subscriber is skipped without reading its backlog at all.
    claimDeliveries: ({ request }) => {
      const excluded = new Set(request.excludeSubscriptions)
      const now = request.now.getTime()
      const due: Row[] = []
      for (const sub of s.subscriptions.all() as Row[]) {
        if (excluded.has(sub.id as string)) continue
        for (const row of s.dueFor.all(sub.id, now, now, request.perSubscription) as Row[]) {
          due.push({ ...row, url: sub.url, secret: sub.secret })
        }
      }
      due.sort((a, b) => Number(a.next_attempt_at) - Number(b.next_attempt_at))
      const rows = due.slice(0, request.limit)
      for (const row of rows) s.lease.run(request.owner, request.leaseUntil.getTime(), row.id)
      return rows
    },
    recordAttempt: ({ result: r }) => {
      const status = r.ok ? 'delivered' : r.retryAt ? 'pending' : 'failed'
      const retryAt = r.retryAt?.getTime() ?? null
      const at = r.at.getTime()
      const recorded = s.recordAttempt.run({
        at,
        status: r.status,
        error: r.error,
        outcome: status,
        retryAt,
        id: r.deliveryId,
        owner: r.leaseOwner,
      })
      if (recorded.changes === 1) s.insertAttempt.run(at, r.status, r.error, r.deliveryId)
    },
    requeueFailed: ({ ids, now }) =>
      ids === undefined
        ? (s.requeueAll.all(now) as string[])
        : ids.flatMap((id) => s.requeueOne.all(now, id) as string[]),
  }
  return {
    execute: (op: WriteOp) => (run[op.op] as (op: WriteOp) => unknown)(op),
    /** Called at every BEGIN: what the previous transaction learnt may be stale now. */
    forget: () => {
      subscribed = undefined
    },
  }
}
