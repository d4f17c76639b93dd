import type pg from 'pg'
import { checkSchemaNotNewer } from '../schema-version.js'
import { inTransaction } from './transaction.js'

/**
 * PostgreSQL schema, one entry per version, mirroring `../sqlite/migrations.ts` (whose version 3,
 * an index, is part of version 2 here; the comments on each table are there).
 * Applied in order, each in its own transaction, and recorded in `schema_migrations`; an applied
 * entry is never edited, only followed by a new one.
 *
 * Differences from SQLite, all deliberate: int64 ids are BIGINT; instants are TIMESTAMPTZ (readable
 * in psql; the adapter converts them to and from `Date`, and JS dates carry milliseconds, which
 * TIMESTAMPTZ holds exactly); text ids use the "C" collation so that "ORDER BY ..., id" sorts
 * bytewise like SQLite whatever the database locale; and the outbox has one extra partial index
 * so that the per-subscriber claim query reads only what it leases.
 */
export const postgresMigrations: { version: number; name: string; sql: string }[] = [
  {
    version: 1,
    name: 'plants and tokens',
    sql: `
      CREATE TABLE plants (
        id BIGINT PRIMARY KEY,
        name TEXT NOT NULL,
        tag TEXT,
        created_at TIMESTAMPTZ NOT NULL
      );
      CREATE INDEX plants_tag_id ON plants (tag, id);
      CREATE TABLE tokens (
        id TEXT COLLATE "C" PRIMARY KEY,
        name TEXT NOT NULL,
        scopes TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE,
        created_at TIMESTAMPTZ NOT NULL,
        expires_at TIMESTAMPTZ,
        last_used_at TIMESTAMPTZ,
        revoked_at TIMESTAMPTZ
      );`,
  },
  {
    version: 2,
    name: 'webhook subscriptions and outbox',
    sql: `
      CREATE TABLE webhook_subscriptions (
        id TEXT COLLATE "C" PRIMARY KEY,
        url TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL
      );
      CREATE TABLE webhook_deliveries (
        id TEXT COLLATE "C" PRIMARY KEY,
        subscription_id TEXT COLLATE "C" NOT NULL,
        plant_id BIGINT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TIMESTAMPTZ NOT NULL,
        lease_owner TEXT,
        lease_until TIMESTAMPTZ,
        last_attempt_at TIMESTAMPTZ,
        last_status INTEGER,
        last_error TEXT,
        created_at TIMESTAMPTZ NOT NULL
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
      CREATE INDEX webhook_deliveries_recent ON webhook_deliveries (created_at);
      CREATE INDEX webhook_deliveries_pending_by_subscription ON webhook_deliveries (subscription_id, next_attempt_at, id)
        WHERE status = 'pending';`,
  },
  {
    version: 3,
    name: 'webhook attempt history',
    sql: `
      CREATE TABLE webhook_attempts (
        delivery_id TEXT COLLATE "C" NOT NULL,
        attempt INTEGER NOT NULL,
        at TIMESTAMPTZ NOT NULL,
        status INTEGER,
        error TEXT,
        PRIMARY KEY (delivery_id, attempt)
      );
      INSERT INTO webhook_attempts (delivery_id, attempt, at, status, error)
        SELECT id, attempts, last_attempt_at, last_status, last_error FROM webhook_deliveries
        WHERE attempts > 0 AND last_attempt_at IS NOT NULL
          AND NOT (status = 'failed' AND last_error IS NOT DISTINCT FROM 'subscription removed');`,
  },
  {
    version: 4,
    name: 'pending deliveries by age',
    sql: `CREATE INDEX webhook_deliveries_pending_age ON webhook_deliveries (created_at)
      WHERE status = 'pending';`,
  },
]

/**
 * Fixed key of the advisory lock that serialises migration runs across every instance sharing the
 * database ("plantstr" in ASCII, so it is recognisable in pg_locks).
 */
export const MIGRATION_LOCK_KEY = 0x706c616e74737472n

/** How long one migration statement may run: 15 minutes. */
const MIGRATION_TIMEOUT_MS = 15 * 60_000

/**
 * Applies pending migrations and resolves to the versions this call applied (empty when the schema
 * was already current). Safe to run from several instances at once: every migration transaction
 * first takes a transaction-scoped advisory lock, then re-reads `schema_migrations`, so a version
 * is applied exactly once and latecomers wait for it rather than failing on "relation exists".
 */
/** `pool` should have no client-side query timeout: see createPool. */
export async function migratePostgres(
  pool: pg.Pool,
  onMigration?: (version: number, name: string) => void,
): Promise<number[]> {
  const applied: number[] = []
  for (const migration of postgresMigrations) {
    const ran = await inTransaction(pool, async (tx) => {
      // DDL on a large table, or waiting for another instance's migration, outlasts the per-request
      // statement timeout set on the pool.
      await tx.query(`SET LOCAL statement_timeout = ${MIGRATION_TIMEOUT_MS}`)
      await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY])
      // Under the lock: two instances creating it at once would collide in pg_type otherwise.
      await tx.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)`)
      const done = await tx.query('SELECT 1 FROM schema_migrations WHERE version = $1', [migration.version])
      if (done.rows.length > 0) return false
      onMigration?.(migration.version, migration.name)
      await tx.query(migration.sql)
      await tx.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, now())', [
        migration.version,
        migration.name,
      ])
      return true
    })
    if (ran) applied.push(migration.version)
  }
  const { rows } = await pool.query('SELECT max(version) AS version FROM schema_migrations')
  checkSchemaNotNewer((rows[0]?.version as number | null) ?? null, postgresMigrations.at(-1)?.version ?? 0)
  return applied
}
