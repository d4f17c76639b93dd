import { setTimeout as sleep } from 'node:timers/promises'
import type pg from 'pg'
import type { ReadObserver, ReadPlace } from '../storage.js'
import type { Guarded } from './create-plants.js'
import { wasNeverRun } from './connection.js'
import { guard, type RetryPolicy } from './guard.js'

/**
 * How long a read waits for the replica to replay the primary's position before it runs on the
 * primary instead: issue 42 saw an asynchronous standby show a write 3.7 ms (median) to 9.3 ms
 * (most) after its 200, so this covers the usual lag; a longer wait would cost more than the
 * primary's answer.
 */
export const REPLICA_WAIT_MS = 50
/** Between two looks at the replica's replay position while it is behind. */
const POLL_MS = 2
/** Most time a replica attempt takes, connecting included, before the read goes to the primary. */
export const REPLICA_ATTEMPT_MS = 500
/** After a replica failure, reads go to the primary this long before the replica is tried again. */
export const REPLICA_REST_MS = 1000

/**
 * The primary's WAL flush position: every commit acknowledged so far (synchronous_commit on) ends
 * at or before it, and a standby is sent WAL only up to it. NULL on a server in recovery.
 */
const WAL_POSITION =
  'SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_flush_lsn()::text END AS lsn'

/** True once the replica has replayed $1; a server not in recovery (a primary) is caught up. */
const CAUGHT_UP = 'SELECT NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= $1::pg_lsn AS caught_up'

/**
 * Plant reads on a replica without stale answers: each batch takes the primary's WAL position
 * (after every read in it arrived), and runs on the replica only once the replica has replayed up
 * to it, so a read sees every write acknowledged before it, by any instance. A replica that stays
 * behind for REPLICA_WAIT_MS, or fails, leaves the read to the primary.
 */
export class ReplicaReads {
  /** Until then (Date.now()), reads skip a replica that just failed. */
  private restUntil = 0

  constructor(
    private readonly primary: pg.Pool,
    /** The read pool, and how many hosts its URL lists. */
    private readonly replica: { pool: pg.Pool; hosts: number },
    /** A primary statement under the request's deadline and retries (guard.ts). */
    private readonly guarded: Guarded,
    /** The request's deadline (Date.now() time). */
    private readonly until: () => number,
    /** Retries on the replica: dead pooled connections only, no backoff (the primary is there). */
    private readonly replicaPolicy: RetryPolicy,
    private readonly observer?: ReadObserver,
  ) {}

  /** The rows of one batch statement, `count` reads, from the replica when it is caught up. */
  async rows(statement: pg.QueryArrayConfig, count: number): Promise<unknown[][]> {
    const position = await this.guarded(() =>
      this.primary.query({ name: 'wal-position', text: WAL_POSITION }),
    )
    const lsn = (position.rows[0]?.lsn ?? null) as string | null
    let place: ReadPlace = 'unavailable'
    if (lsn !== null && Date.now() >= this.restUntil) {
      const attempt = { abandoned: false }
      try {
        const deadline = Math.min(this.until(), Date.now() + REPLICA_ATTEMPT_MS)
        const answer = await guard(
          () => this.onSomeHost(statement, lsn, attempt),
          deadline,
          this.replicaPolicy,
        )
        if (answer !== 'lagging') {
          this.observer?.readsRan('replica', count)
          return answer.rows
        }
        place = 'lagging'
      } catch {
        attempt.abandoned = true
        this.restUntil = Date.now() + REPLICA_REST_MS
      }
    }
    this.observer?.readsRan(place, count)
    return (await this.guarded(() => this.primary.query(statement))).rows
  }

  /**
   * A host of the list that refused the connection or had the wrong role (a primary before a
   * standby, with prefer-standby) moved the choice on: the next host is tried at once.
   */
  private async onSomeHost(
    statement: pg.QueryArrayConfig,
    lsn: string,
    attempt: { abandoned: boolean },
  ): Promise<pg.QueryArrayResult | 'lagging'> {
    for (let tried = 1; ; tried++) {
      try {
        return await this.onReplica(statement, lsn, attempt)
      } catch (error) {
        if (tried >= this.replica.hosts || !wasNeverRun(error) || attempt.abandoned) throw error
      }
    }
  }

  /**
   * The check and the read on one connection (a host list may hold several replicas), as two
   * statements: a statement's snapshot is taken before it runs, so a check inside the read itself
   * could pass on WAL replayed after the snapshot that the read does not see.
   */
  private async onReplica(
    statement: pg.QueryArrayConfig,
    lsn: string,
    attempt: { abandoned: boolean },
  ): Promise<pg.QueryArrayResult | 'lagging'> {
    const client = await this.replica.pool.connect()
    let failure: Error | undefined
    try {
      const waitUntil = performance.now() + REPLICA_WAIT_MS
      for (;;) {
        // Past the attempt's deadline the read went to the primary: nobody waits for this answer.
        if (attempt.abandoned) return 'lagging'
        const { rows } = await client.query({ name: 'replica-caught-up', text: CAUGHT_UP, values: [lsn] })
        if ((rows[0] as { caught_up: boolean | null } | undefined)?.caught_up === true) break
        if (performance.now() >= waitUntil) return 'lagging'
        await sleep(POLL_MS)
      }
      return await client.query(statement)
    } catch (error) {
      failure = error instanceof Error ? error : new Error(String(error))
      throw error
    } finally {
      // Released with its error, pg-pool discards the connection (a timed-out one included).
      client.release(failure)
    }
  }
}
