import type { Delivery, DeliveryAttempt, TokenRecord } from './storage.js'

/**
 * The deliveries whose attempt a lease holder may record: those still pending, and those failed
 * only because their subscription was removed while the attempt was in flight (a probe found 12
 * of 332 such sends acknowledged by the subscriber yet recorded failed, with no attempt).
 */
export const RECORDABLE = `(status = 'pending' OR (status = 'failed' AND last_error = 'subscription removed'))`

/** A row as a driver returns it. */
export type Row = Record<string, unknown>

/**
 * How a store hands back a time: SQLite keeps epoch milliseconds in an INTEGER (a bigint from
 * `safeIntegers` statements), PostgreSQL's timestamptz arrives as a Date.
 */
export type TimeReader = (value: unknown) => Date

/**
 * Token, delivery and attempt rows of either store as the storage interface's records. The tables have
 * the same columns in both; only the time type differs. Integers go through Number/BigInt, as
 * SQLite may return either type for them.
 */
export function recordReaders(time: TimeReader) {
  const maybeTime = (value: unknown): Date | null =>
    value === null || value === undefined ? null : time(value)
  const maybeNumber = (value: unknown): number | null =>
    value === null || value === undefined ? null : Number(value)
  const maybeText = (value: unknown): string | null => (value as string | null | undefined) ?? null
  return {
    toToken: (row: Row): TokenRecord => ({
      id: row.id as string,
      name: row.name as string,
      scopes: (row.scopes as string).split(',').filter(Boolean),
      hash: row.token_hash as string,
      createdAt: time(row.created_at),
      expiresAt: maybeTime(row.expires_at),
      lastUsedAt: maybeTime(row.last_used_at),
      revokedAt: maybeTime(row.revoked_at),
    }),
    toDelivery: (row: Row): Delivery => ({
      id: row.id as string,
      subscriptionId: row.subscription_id as string,
      plantId: BigInt(row.plant_id as bigint),
      payload: row.payload as string,
      status: row.status as Delivery['status'],
      attempts: Number(row.attempts),
      nextAttemptAt: time(row.next_attempt_at),
      lastAttemptAt: maybeTime(row.last_attempt_at),
      lastStatus: maybeNumber(row.last_status),
      lastError: maybeText(row.last_error),
      createdAt: time(row.created_at),
    }),
    toAttempt: (row: Row): DeliveryAttempt => ({
      deliveryId: row.delivery_id as string,
      attempt: Number(row.attempt),
      at: time(row.at),
      status: maybeNumber(row.status),
      error: maybeText(row.error),
    }),
  }
}
