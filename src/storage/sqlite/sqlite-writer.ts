/**
 * The writer thread: the one place a SqliteStorage writes. It runs in a worker so the event loop
 * stays free while a commit waits for fsync, and it group-commits: every request that has
 * arrived by the time a batch starts shares one transaction and one fsync, and all of them are
 * answered only after COMMIT returned. If anything in the batch fails, it is rolled back and
 * every request in it is answered with that error, so none of them is stored.
 */
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads'
import type Database from 'better-sqlite3'
import type { CreateOutcome } from '../storage.js'
import { DEFAULT_MAX_BATCH, openSqliteDatabase, type Row, toPlant } from './database.js'
import {
  type FromWriter,
  serializeError,
  statIndex,
  type ToWriter,
  type WriteOp,
  type WriteResult,
  type WriterData,
  type WriterStats,
} from './writer-protocol.js'

type Request = WriteOp & { seq: number }

function prepareOps(db: Database.Database) {
  const exact = (sql: string) => db.prepare(sql).safeIntegers(true)
  const s = {
    insertPlant: exact(
      'INSERT INTO plants (id, name, tag, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING',
    ),
    getPlant: exact('SELECT id, name, tag FROM plants WHERE id = ?'),
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
    failSubscriptionDeliveries: db.prepare(`UPDATE webhook_deliveries
      SET status = 'failed', last_error = 'subscription removed', lease_owner = NULL, lease_until = NULL
      WHERE subscription_id = ? AND status = 'pending'`),
    recordAttempt: db.prepare(`UPDATE webhook_deliveries
      SET attempts = attempts + 1, last_attempt_at = ?, last_status = ?, last_error = ?,
          status = ?, next_attempt_at = coalesce(?, next_attempt_at), lease_owner = NULL, lease_until = NULL
      WHERE id = ? AND lease_owner = ? AND status = 'pending'`),
    lease: db.prepare('UPDATE webhook_deliveries SET lease_owner = ?, lease_until = ? WHERE id = ?'),
  }

  // Whether any webhook subscriber exists, asked once per transaction rather than once per create:
  // while the batch holds the write lock no other connection can change it, and this batch's own
  // subscription writes reset it.
  let subscribed: boolean | undefined

  // Each runs inside the batch's transaction; statements run in arrival order, so two requests
  // for one id in the same batch behave exactly as if they had come one after the other.
  const run: { [K in WriteOp['op']]: (op: Extract<WriteOp, { op: K }>) => unknown } = {
    createPlant: ({ plant, payload }): CreateOutcome => {
      const now = Date.now()
      if (s.insertPlant.run(plant.id, plant.name, plant.tag ?? null, now).changes === 1) {
        subscribed ??= s.anySubscription.get() === 1
        if (subscribed) s.enqueueDeliveries.run(plant.id, payload, now, now)
        return { kind: 'created' }
      }
      const existing = toPlant(s.getPlant.get(plant.id) as Row)
      const same = existing.name === plant.name && existing.tag === plant.tag
      return same ? { kind: 'replayed' } : { kind: 'conflict', existing }
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
    claimDeliveries: ({ request }) => {
      const excluded = request.excludeSubscriptions
      const now = request.now.getTime()
      const rows = db
        .prepare(
          `SELECT * FROM (
             SELECT d.*, s.url, s.secret,
                    row_number() OVER (PARTITION BY d.subscription_id ORDER BY d.next_attempt_at) AS rank
             FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
             WHERE d.status = 'pending' AND d.next_attempt_at <= ?
               AND (d.lease_until IS NULL OR d.lease_until < ?)
               ${excluded.length ? `AND d.subscription_id NOT IN (${excluded.map(() => '?').join(',')})` : ''}
           ) WHERE rank <= ? ORDER BY next_attempt_at LIMIT ?`,
        )
        .safeIntegers(true)
        .all(now, now, ...excluded, request.perSubscription, request.limit) as Row[]
      for (const row of rows) s.lease.run(request.owner, request.leaseUntil.getTime(), row.id)
      return rows
    },
    recordAttempt: ({ result: r }) => {
      const status = r.ok ? 'delivered' : r.retryAt ? 'pending' : 'failed'
      const retryAt = r.retryAt?.getTime() ?? null
      s.recordAttempt.run(r.at.getTime(), r.status, r.error, status, retryAt, r.deliveryId, r.leaseOwner)
    },
  }
  return {
    execute: (request: Request) => (run[request.op] as (op: WriteOp) => unknown)(request),
    /** Called at every BEGIN: what the previous transaction learnt may be stale now. */
    forget: () => {
      subscribed = undefined
    },
  }
}

function serve(port: NonNullable<typeof parentPort>, data: WriterData): void {
  const post = (message: FromWriter) => port.postMessage(message)
  let db: Database.Database
  try {
    db = openSqliteDatabase(data.options, 'writer')
  } catch (error) {
    post({ type: 'fatal', error: serializeError(error) })
    port.close()
    return
  }
  const { execute, forget } = prepareOps(db)
  const control = {
    begin: db.prepare('BEGIN IMMEDIATE'),
    commit: db.prepare('COMMIT'),
    rollback: db.prepare('ROLLBACK'),
    savepoint: db.prepare('SAVEPOINT op'),
    release: db.prepare('RELEASE op'),
    rollbackTo: db.prepare('ROLLBACK TO op'),
  }
  const stats = new BigInt64Array(data.stats)
  const count = (key: keyof WriterStats, by = 1) => Atomics.add(stats, statIndex(key), BigInt(by))
  const maxBatch = data.options.maxBatch ?? DEFAULT_MAX_BATCH

  /**
   * A create that fails fails its whole batch (the rule the HTTP contract relies on). Any other
   * write runs under a savepoint, so its own expected failure (a duplicate token id, say) is
   * answered to it alone and does not take unrelated creates down with it.
   */
  function runBatch(batch: Request[]): WriteResult[] {
    count('batchesStarted')
    const results: WriteResult[] = []
    try {
      control.begin.run()
      forget()
      try {
        for (const request of batch) {
          if (request.op === 'createPlant') {
            results.push({ seq: request.seq, ok: true, value: execute(request) })
            continue
          }
          control.savepoint.run()
          try {
            results.push({ seq: request.seq, ok: true, value: execute(request) })
            control.release.run()
          } catch (error) {
            // SQLite rolls the whole transaction back itself after I/O or full-disk errors.
            if (!db.inTransaction) throw error
            control.rollbackTo.run()
            control.release.run()
            results.push({ seq: request.seq, ok: false, error: serializeError(error) })
          }
        }
        control.commit.run()
      } catch (error) {
        if (db.inTransaction) control.rollback.run()
        throw error
      }
    } catch (error) {
      count('batchesFailed')
      const failure = serializeError(error)
      return batch.map((request) => ({ seq: request.seq, ok: false, error: failure }))
    }
    count('batchesCommitted')
    count('requestsCommitted', batch.length)
    const largest = statIndex('largestBatch')
    if (BigInt(batch.length) > Atomics.load(stats, largest))
      Atomics.store(stats, largest, BigInt(batch.length))
    return results
  }

  const queue: ToWriter[] = []
  let scheduled = false
  let closing = false

  // One batch per turn of the event loop: messages that arrived while the previous batch was
  // syncing are delivered before the next turn's flush, and receiveMessageOnPort takes any
  // that came after, so a batch holds everything waiting (up to maxBatch).
  function flush(): void {
    scheduled = false
    for (let next = receiveMessageOnPort(port); next; next = receiveMessageOnPort(port)) {
      accept(next.message as ToWriter | ToWriter[])
      if (queue.length >= maxBatch) break
    }
    const batch: Request[] = []
    while (batch.length < maxBatch && queue.length > 0 && queue[0]?.op !== 'close')
      batch.push(queue.shift() as Request)
    if (batch.length > 0) post({ type: 'results', results: runBatch(batch) })
    if (queue[0]?.op === 'close') {
      closing = true
      db.close()
      port.close()
      return
    }
    if (queue.length > 0) schedule()
  }
  const schedule = () => {
    if (scheduled || closing) return
    scheduled = true
    setImmediate(flush)
  }

  // The client posts the writes of one of its event-loop turns as an array.
  const accept = (message: ToWriter | ToWriter[]) => {
    if (Array.isArray(message)) queue.push(...message)
    else queue.push(message)
  }
  port.on('message', (message: ToWriter | ToWriter[]) => {
    accept(message)
    schedule()
  })
  post({ type: 'ready' })
}

if (parentPort) serve(parentPort, workerData as WriterData)
