/**
 * SQLite schema, one entry per version. Applied in order, each in its own transaction, and
 * recorded in `schema_migrations`; an applied entry is never edited, only followed by a new one.
 */
export const sqliteMigrations: { version: number; name: string; sql: string }[] = [
  {
    version: 1,
    name: 'plants and tokens',
    sql: `
      CREATE TABLE plants (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        tag TEXT,
        created_at INTEGER NOT NULL
      );
      CREATE INDEX plants_tag_id ON plants (tag, id);
      CREATE TABLE tokens (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        scopes TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        last_used_at INTEGER,
        revoked_at INTEGER
      );`,
  },
  {
    version: 2,
    name: 'webhook subscriptions and outbox',
    sql: `
      CREATE TABLE webhook_subscriptions (
        id TEXT PRIMARY KEY,
        url TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );
      CREATE TABLE webhook_deliveries (
        id TEXT PRIMARY KEY,
        subscription_id TEXT NOT NULL,
        plant_id INTEGER NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        lease_owner TEXT,
        lease_until INTEGER,
        last_attempt_at INTEGER,
        last_status INTEGER,
        last_error TEXT,
        created_at INTEGER NOT NULL
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
      CREATE INDEX webhook_deliveries_recent ON webhook_deliveries (created_at);`,
  },
  {
    version: 3,
    name: 'due deliveries by subscription',
    // The claim reads each subscriber's due deliveries from here (write-ops.ts), as PostgreSQL's
    // does from its own; through the (status, next_attempt_at) index it walked every due row of
    // every subscriber, a hung one's whole backlog included, on every poll.
    sql: `CREATE INDEX webhook_deliveries_pending_by_subscription ON webhook_deliveries (subscription_id, next_attempt_at)
      WHERE status = 'pending';`,
  },
  {
    version: 4,
    name: 'webhook attempt history',
    // One row per attempt, written in the transaction that updates the delivery, so that
    // `webhooks deliveries` can show each attempt's status and error, not only the last. A
    // delivery attempted before this version keeps its last attempt (the only one recorded then),
    // unless a subscription removal has since overwritten that attempt's error.
    sql: `
      CREATE TABLE webhook_attempts (
        delivery_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        at INTEGER NOT NULL,
        status INTEGER,
        error TEXT,
        PRIMARY KEY (delivery_id, attempt)
      ) WITHOUT ROWID;
      INSERT INTO webhook_attempts (delivery_id, attempt, at, status, error)
        SELECT id, attempts, last_attempt_at, last_status, last_error FROM webhook_deliveries
        WHERE attempts > 0 AND last_attempt_at IS NOT NULL
          AND NOT (status = 'failed' AND last_error IS 'subscription removed');`,
  },
  {
    version: 5,
    name: 'pending deliveries by age',
    // The metrics' backlog gauges (count and oldest) read only this index; through the
    // (status, next_attempt_at) one, each scrape read every pending row (sqlite-storage.ts).
    sql: `CREATE INDEX webhook_deliveries_pending_age ON webhook_deliveries (created_at)
      WHERE status = 'pending';`,
  },
]
