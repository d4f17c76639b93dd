import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { migratePostgres, postgresMigrations } from '../../src/storage/postgres/migrations.js'
import {
  createPool,
  isUnavailableError,
  openPostgresStorage,
} from '../../src/storage/postgres/postgres-storage.js'
import { inTransaction } from '../../src/storage/postgres/transaction.js'
import { type Storage, StoreUnavailableError } from '../../src/storage/storage.js'
import { type Admin, pgAdmin } from '../pg-admin.js'
import { storageContract } from './contract.js'
import { create, listPlants, plant, readPlant } from './fixtures.js'
import { plantJson } from '../../src/storage/plant-json.js'
import { fileDatabaseUrl, postgresHint, skipUnless, waitFor } from '../helpers.js'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** How many of the store's connections wait on a lock. */
const lockWaiters = async (admin: Admin) =>
  (
    await admin`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE application_name = 'plant-store' AND wait_event_type = 'Lock'`
  )[0]?.n as number

/** One webhook subscriber, so that creates enqueue outbox rows. */
const subscribeOne = (store: Storage) =>
  store.addSubscription({ id: 'sub', url: 'https://example.test/h', secret: 's', createdAt: new Date() })

// A skip with its reason when PostgreSQL is missing; under PLANT_STORE_REQUIRE_ALL_TESTS, a failure.
const skip = skipUnless(!!process.env.TEST_DATABASE_URL, 'TEST_DATABASE_URL', postgresHint)
// This file's own database (helpers.ts), so the wipes below touch no other file's.
const databaseUrl = skip ? '' : await fileDatabaseUrl()

describe('postgres storage', { skip }, () => {
  const options = { url: databaseUrl, poolSize: 10, statementTimeoutMs: 5000 }

  async function reset(): Promise<void> {
    const admin = pgAdmin(databaseUrl)
    try {
      await admin.unsafe('DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public')
    } finally {
      await admin.end()
    }
  }

  storageContract('postgres', () => openPostgresStorage(options), reset)

  /** A fresh store and an admin connection on it, for one test; both closed afterwards. */
  async function withStoreAndAdmin(
    test: (store: Awaited<ReturnType<typeof openPostgresStorage>>, admin: Admin) => Promise<void>,
  ): Promise<void> {
    await reset()
    const store = await openPostgresStorage(options)
    const admin = pgAdmin(databaseUrl)
    try {
      await test(store, admin)
    } finally {
      await store.close()
      await admin.end()
    }
  }

  describe('postgres adapter', () => {
    it('starts the attempt history with the last attempt of deliveries made before it', async () => {
      await reset()
      const admin = pgAdmin(databaseUrl)
      const sql = createPool({ ...options, poolSize: 1 }, false)
      try {
        await admin.unsafe(`CREATE TABLE schema_migrations (
          version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)`)
        for (const m of postgresMigrations.filter((m) => m.version <= 2)) {
          await admin.unsafe(m.sql)
          await admin`INSERT INTO schema_migrations VALUES (${m.version}, ${m.name}, now())`
        }
        const at = (ms: number) => new Date(ms)
        const rows = [
          ['retrying', 'pending', 2, at(2000), 500, 'HTTP 500'],
          ['delivered', 'delivered', 1, at(3000), 204, null],
          ['untried', 'pending', 0, null, null, null],
          ['removed', 'failed', 1, at(4000), 503, 'subscription removed'],
        ] as const
        for (const [id, status, attempts, lastAt, lastStatus, lastError] of rows) {
          await admin`INSERT INTO webhook_deliveries (id, subscription_id, plant_id, payload, status,
              attempts, next_attempt_at, last_attempt_at, last_status, last_error, created_at)
            VALUES (${id}, 's', 1, '{}', ${status}, ${attempts}, now(), ${lastAt}, ${lastStatus},
              ${lastError}, now())`
        }
        assert.deepEqual(await migratePostgres(sql), [3, 4])
        const history = await admin`SELECT * FROM webhook_attempts ORDER BY delivery_id`
        assert.deepEqual(
          history.map((r) => ({ ...r })),
          [
            { delivery_id: 'delivered', attempt: 1, at: at(3000), status: 204, error: null },
            { delivery_id: 'retrying', attempt: 2, at: at(2000), status: 500, error: 'HTTP 500' },
          ],
        )
      } finally {
        await sql.end()
        await admin.end()
      }
    })

    it('migrates each version exactly once when three instances start together', async () => {
      await reset()
      const clients = [1, 2, 3].map(() => createPool({ ...options, poolSize: 1 }, false))
      try {
        const runs = await Promise.all(clients.map((sql) => migratePostgres(sql)))
        assert.deepEqual(runs.flat().sort(), [1, 2, 3, 4])
        assert.deepEqual(await Promise.all(clients.map((sql) => migratePostgres(sql))), [[], [], []])
        const [first] = clients
        assert.ok(first)
        const { rows } = await first.query('SELECT version FROM schema_migrations ORDER BY version')
        assert.deepEqual(
          rows.map((r) => r.version),
          [1, 2, 3, 4],
        )
      } finally {
        await Promise.all(clients.map((sql) => sql.end()))
      }
    })

    it('reads int8 as bigint and binds bigint exactly', async () => {
      const sql = createPool({ ...options, poolSize: 1 })
      try {
        const {
          rows: [row],
        } = await sql.query('SELECT $1::int8 + 0 AS n, ($2::int8)::text AS t', [
          9007199254740993n,
          -9223372036854775808n,
        ])
        assert.equal(row?.n, 9007199254740993n)
        assert.equal(row?.t, '-9223372036854775808')
      } finally {
        await sql.end()
      }
    })

    it('sets the statement timeout on every connection', async () => {
      const sql = createPool({ ...options, poolSize: 1, statementTimeoutMs: 250 })
      try {
        const {
          rows: [row],
        } = await sql.query('SHOW statement_timeout')
        assert.equal(row?.statement_timeout, '250ms')
        await assert.rejects(sql.query('SELECT pg_sleep(2)'), (error: Error & { code?: string }) => {
          assert.equal(error.code, '57014')
          assert.equal(isUnavailableError(error), false, 'a cancelled statement is not an outage')
          return true
        })
      } finally {
        await sql.end()
      }
    })

    it('reports an unreachable server as StoreUnavailableError', async () => {
      const unreachable = new URL(databaseUrl)
      unreachable.port = '1'
      await assert.rejects(openPostgresStorage({ ...options, url: unreachable.href }), (error: Error) => {
        assert.ok(error instanceof StoreUnavailableError, `${error.name}: ${error.message}`)
        // The start's retries end by its deadline or by their own last refusal, whichever comes
        // first; either way the message names PostgreSQL and the refused connection.
        assert.match(
          error.message,
          /^PostgreSQL (is unavailable|did not answer within the request's deadline)/,
        )
        assert.match(error.message, /ECONNREFUSED/)
        return true
      })
    })

    it('classifies connection failures and only those', () => {
      for (const code of ['ECONNREFUSED', 'ENOTFOUND', 'ETIMEDOUT', '57P01', '08006', '25006']) {
        assert.equal(isUnavailableError(Object.assign(new Error(code), { code })), true, code)
      }
      // pg's own connection failures carry no code (brianc/node-postgres#3380), only a message.
      for (const message of [
        'Connection terminated unexpectedly',
        'Connection terminated due to connection timeout',
        'timeout exceeded when trying to connect',
        'Query read timeout',
        'Client has encountered a connection error and is not queryable',
      ]) {
        assert.equal(isUnavailableError(new Error(message)), true, message)
      }
      assert.equal(isUnavailableError(new Error('bind message supplies 1 parameters')), false)
      for (const code of ['23505', '42P01', '57014', undefined]) {
        assert.equal(
          isUnavailableError(Object.assign(new Error(String(code)), { code })),
          false,
          String(code),
        )
      }
    })

    it('group-commits creates issued together, each with its own outcome, same ids in arrival order', () =>
      withStoreAndAdmin(async (store, admin) => {
        const ids = Array.from({ length: 200 }, (_, i) => BigInt(i) * 7919n - 2n ** 62n)
        const many = await Promise.all(ids.map((id) => store.createPlant(plant(id, `p${id}`))))
        assert.ok(many.every((o) => o.kind === 'created'))
        const [row] =
          await admin`SELECT count(*)::int AS rows, count(DISTINCT xmin::text)::int AS transactions
          FROM plants WHERE id = ANY(${ids.map(String)}::int8[])`
        assert.equal(row?.rows, 200)
        assert.ok(Number(row.transactions) < 200, `${row.transactions} transactions for 200 creates`)

        const results = await Promise.all(
          [
            plant(5n, 'fern', 'green'),
            plant(5n, 'fern', 'green'),
            plant(5n, 'palm', 'green'),
            plant(5n, 'fern'),
            plant(6n, 'cactus'),
            plant(6n, 'cactus'),
          ].map((p) => store.createPlant(p)),
        )
        const conflict = { kind: 'conflict', existing: plant(5n, 'fern', 'green') }
        assert.deepEqual(results, [
          { kind: 'created' },
          { kind: 'replayed' },
          conflict,
          conflict,
          { kind: 'created' },
          { kind: 'replayed' },
        ])
      }))

    it('answers every create of a batch whose statement fails with the error, and stores none', () =>
      withStoreAndAdmin(async (store, admin) => {
        await subscribeOne(store)
        assert.equal((await store.createPlant(plant(1n, 'stored before'))).kind, 'created')
        await admin.unsafe(`
          CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN IF NEW.name = 'poison' THEN RAISE EXCEPTION 'poisoned plant refused'; END IF; RETURN NEW; END $$;
          CREATE TRIGGER poison BEFORE INSERT ON plants FOR EACH ROW EXECUTE FUNCTION poison();`)
        const batch = [
          plant(10n, 'fine'),
          plant(1n, 'stored before'),
          plant(11n, 'poison'),
          plant(12n, 'fine too'),
        ]
        const results = await Promise.allSettled(batch.map((p) => store.createPlant(p)))
        for (const [i, result] of results.entries()) {
          assert.equal(result.status, 'rejected', `request ${i} must fail with its batch`)
          assert.match((result as PromiseRejectedResult).reason.message, /poisoned plant refused/)
        }
        const stored = await admin`SELECT id FROM plants ORDER BY id`
        assert.deepEqual(
          stored.map((r) => r.id),
          [1n],
          'none of the batch is stored',
        )
        const outbox = await admin`SELECT plant_id FROM webhook_deliveries`
        assert.deepEqual(
          outbox.map((r) => r.plant_id),
          [1n],
          'no outbox row of the failed batch',
        )
        assert.deepEqual(
          await store.createPlant(plant(10n, 'fine')),
          { kind: 'created' },
          'the next batch works',
        )
      }))

    it('fails every delivery of a subscription removed while a create batch enqueues for it', () =>
      withStoreAndAdmin(async (store, admin) => {
        await subscribeOne(store)
        // Hold the batch: an uncommitted row with its id makes its INSERT wait, after its snapshot
        // (which still sees the subscription) was taken.
        const holder = await admin.reserve()
        await holder`BEGIN`
        await holder`INSERT INTO plants (id, name, created_at) VALUES (777, 'held', now())`
        // The admin's one connection is the holder's: the waits are watched from another.
        const watcher = pgAdmin(databaseUrl)
        const created = store.createPlant(plant(777n, 'racing'))
        await waitFor('the batch to wait on the held row', async () => (await lockWaiters(watcher)) >= 1)
        let settled = false
        const removed = store.removeSubscription('sub').finally(() => (settled = true))
        await waitFor(
          'the removal to end or wait on the batch',
          async () => settled || (await lockWaiters(watcher)) >= 2,
        )
        await watcher.end()
        await holder`ROLLBACK`
        holder.release()
        assert.equal((await created).kind, 'created')
        assert.equal(await removed, true)
        const rows = await admin`SELECT status, last_error FROM webhook_deliveries`
        assert.deepEqual(
          rows.filter((row) => row.status === 'pending'),
          [],
          `no delivery is left pending for a removed subscription: ${JSON.stringify(rows)}`,
        )
      }))

    it('survives its connection being killed in the middle of a write', async () => {
      await reset()
      const store = await openPostgresStorage(options)
      const admin = pgAdmin(databaseUrl, 2)
      const blocker = await admin.reserve()
      try {
        // An uncommitted insert of the same id makes createPlant wait inside the server.
        await blocker`BEGIN`
        await blocker`INSERT INTO plants (id, name, created_at) VALUES (77, 'blocker', now())`
        const pending = store.createPlant(plant(77n, 'fern'))
        pending.catch(() => {})
        const waiting = () => admin`SELECT pid FROM pg_stat_activity
          WHERE application_name = 'plant-store' AND wait_event_type = 'Lock'`
        for (let i = 0; i < 100 && (await waiting()).length === 0; i++) await sleep(20)
        assert.equal((await waiting()).length, 1, 'createPlant is waiting on the lock')
        await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE application_name = 'plant-store' AND wait_event_type = 'Lock'`
        await assert.rejects(pending, StoreUnavailableError)
        await blocker`ROLLBACK`
        assert.deepEqual(await store.createPlant(plant(77n, 'fern')), { kind: 'created' })
        assert.deepEqual(await readPlant(store, 77n), plant(77n, 'fern'))
        await sleep(50)
      } finally {
        blocker.release()
        await store.close()
        await admin.end()
      }
    })

    it('answers each of many reads issued together (one batch) with its own plant or page', () =>
      withStoreAndAdmin(async (store) => {
        for (let id = 1n; id <= 30n; id++)
          await create(store, plant(id, `p${id}`, id % 3n === 0n ? 'fern' : undefined))
        const ids = [5n, 5n, 31n, 1n, 30n, -1n, 9223372036854775807n, 17n]
        const reads = await Promise.all(ids.map((id) => store.readPlantJson(id)))
        assert.deepEqual(
          reads,
          ids.map((id) =>
            id >= 1n && id <= 30n
              ? plantJson(plant(id, `p${id}`, id % 3n === 0n ? 'fern' : undefined))
              : undefined,
          ),
        )
        const queries = [
          { limit: 2 },
          { limit: 2 },
          { limit: 5, after: 27n },
          { limit: 3, tag: 'fern' },
          { limit: 10, tag: 'fern', after: 24n },
          { limit: 4, tag: 'cactus' },
          { limit: 1, after: 30n },
        ]
        const pages = await Promise.all(queries.map((query) => store.listPlantsJson(query)))
        const idsOf = (json: string) => (JSON.parse(json) as { id: number }[]).map((p) => p.id)
        assert.deepEqual(
          pages.map((page) => [idsOf(page.json), page.lastId, page.more]),
          [
            [[1, 2], 2n, true],
            [[1, 2], 2n, true],
            [[28, 29, 30], 30n, false],
            [[3, 6, 9], 9n, true],
            [[27, 30], 30n, false],
            [[], undefined, false],
            [[], undefined, false],
          ],
        )
      }))

    it('survives its connection being terminated inside a transaction, between two statements', async () => {
      const pool = createPool({ ...options, poolSize: 1 })
      const admin = pgAdmin(databaseUrl)
      try {
        const transaction = inTransaction(pool, async (tx) => {
          const { rows } = await tx.query('SELECT pg_backend_pid() AS pid')
          const pid = rows[0]?.pid as number
          await admin`SELECT pg_terminate_backend(${pid})`
          // The server has closed the connection, which is idle in the transaction now.
          while ((await admin`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`).length > 0) await sleep(20)
          await sleep(50)
          await tx.query('SELECT 1')
        })
        await assert.rejects(transaction, (error: Error) => {
          assert.ok(isUnavailableError(error), `${error.name}: ${error.message}`)
          return true
        })
        const { rows } = await pool.query('SELECT 1 AS one')
        assert.equal(rows[0]?.one, 1, 'the pool opens a new connection')
      } finally {
        await pool.end()
        await admin.end()
      }
    })

    it('recovers by itself after its connections are terminated', async () => {
      await reset()
      const store = await openPostgresStorage(options)
      const admin = pgAdmin(databaseUrl)
      try {
        await store.ping()
        await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE application_name = 'plant-store' AND datname = current_database() AND pid <> pg_backend_pid()`
        await store.ping()
        assert.deepEqual(await listPlants(store, { limit: 1 }), [])
      } finally {
        await store.close()
        await admin.end()
      }
    })
  })
})
