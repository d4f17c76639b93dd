import assert from 'node:assert/strict'
import path from 'node:path'
import { describe, it } from 'node:test'
import { openSqliteDatabase } from '../../src/storage/sqlite/database.js'
import { dueDeliveriesSql } from '../../src/storage/sqlite/write-ops.js'
import { tempDir } from '../helpers.js'

/**
 * A webhook claim must cost the same whatever another subscriber's backlog: each subscriber's due
 * deliveries are read from an index range of its own. Through the (status, next_attempt_at) index
 * the claim walked every due row of every subscriber, so a hung subscriber's growing backlog
 * slowed the writer that creates share (a probe measured 50-57 ms per claim at 15,000 rows). As
 * for listing, the query plan is the proof, not a timing.
 */
describe('webhook claims read one subscriber at a time from its own index range (sqlite)', () => {
  it('searches webhook_deliveries_pending_by_subscription in order and never sorts', () => {
    const db = openSqliteDatabase({ path: path.join(tempDir(), 'claim-plan.db'), synchronous: 'normal' })
    try {
      db.exec(`INSERT INTO webhook_subscriptions (id, url, secret, created_at)
        VALUES ('hung', 'http://a', 's', 0), ('healthy', 'http://b', 's', 0)`)
      db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
        INSERT INTO webhook_deliveries (id, subscription_id, plant_id, payload, status, next_attempt_at, created_at)
        SELECT 'msg_' || i, CASE WHEN i % 1000 = 0 THEN 'healthy' ELSE 'hung' END, i, '{}',
               CASE WHEN i % 3 = 0 THEN 'delivered' ELSE 'pending' END, i, i FROM n`)
      db.exec('ANALYZE')
      const detail = (
        db.prepare(`EXPLAIN QUERY PLAN ${dueDeliveriesSql}`).all('healthy', 1e12, 1e12, 4) as {
          detail: string
        }[]
      )
        .map((row) => row.detail)
        .join(' | ')
      assert.match(
        detail,
        /^SEARCH webhook_deliveries USING INDEX webhook_deliveries_pending_by_subscription \(subscription_id=\? AND next_attempt_at<\?\)$/,
        detail,
      )
      const due = db.prepare(dueDeliveriesSql).all('healthy', 1e12, 1e12, 4) as { id: string }[]
      assert.deepEqual(
        due.map((row) => row.id),
        ['msg_1000', 'msg_2000', 'msg_4000', 'msg_5000'],
      )
    } finally {
      db.close()
    }
  })
})
