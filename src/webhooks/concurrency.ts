/** Sends in flight across the subscribers that are below their own limit (the healthy ones). */
export const WEBHOOK_MAX_IN_FLIGHT = 64

/** Sends in flight to one subscriber; a slow one is skipped by claims once it has this many. */
export const WEBHOOK_PER_SUBSCRIPTION = 4

/**
 * Most sends (one socket each) a worker has in flight: its shared limit, plus as many again held
 * by subscribers at their own limit. The descriptor budget (descriptor-budget.ts) reserves this.
 */
export function mostWebhookSends(maxInFlight = WEBHOOK_MAX_IN_FLIGHT): number {
  return 2 * maxInFlight
}
