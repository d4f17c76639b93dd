/**
 * Retry schedule for webhook deliveries: exponential backoff with jitter, bounded attempts.
 *
 * After failed attempt n (1-based) the next one waits min(base * 2^(n-1), max), scaled by a random
 * factor in [0.75, 1.25) so that receivers recovering from an outage are not hit by every retry at
 * the same instant. After `maxAttempts` attempts the delivery is failed for good.
 *
 * Defaults (WEBHOOK_BACKOFF_BASE_MS=5000, WEBHOOK_BACKOFF_MAX_MS=3h, WEBHOOK_MAX_ATTEMPTS=19):
 * the first attempt is immediate, then 18 waits of 5 s, 10 s, 20 s, ... 2560 s, 5120 s, 10240 s
 * (12 doubling waits, 5.7 h together) and six waits capped at 3 h (18 h): about 23.7 h between the
 * first and the last attempt, i.e. about a day (17.8 to 29.6 h with jitter).
 */
export interface BackoffPolicy {
  baseMs: number
  maxMs: number
  maxAttempts: number
}

export const JITTER_MIN = 0.75
export const JITTER_MAX = 1.25

/** Delay before the next attempt, after `attempts` attempts have failed (attempts >= 1). */
export function backoffDelayMs(
  policy: BackoffPolicy,
  attempts: number,
  random: () => number = Math.random,
): number {
  const n = Math.max(1, attempts)
  // 2^(n-1) overflows to Infinity for huge n; min() keeps it at the cap.
  const raw = Math.min(policy.baseMs * 2 ** (n - 1), policy.maxMs)
  const factor = JITTER_MIN + (JITTER_MAX - JITTER_MIN) * random()
  return Math.max(1, Math.round(raw * factor))
}

/** True when `attempts` attempts have been made and none is left: the delivery is failed. */
export function attemptsExhausted(policy: BackoffPolicy, attempts: number): boolean {
  return attempts >= policy.maxAttempts
}

/** When to try again after `attempts` failed attempts, or null when the budget is spent. */
export function nextRetryAt(
  policy: BackoffPolicy,
  attempts: number,
  now: Date,
  random: () => number = Math.random,
): Date | null {
  if (attemptsExhausted(policy, attempts)) return null
  return new Date(now.getTime() + backoffDelayMs(policy, attempts, random))
}

/** The schedule's total span without jitter, from the first attempt to the last (for docs and tests). */
export function nominalScheduleMs(policy: BackoffPolicy): number {
  let total = 0
  for (let n = 1; n < policy.maxAttempts; n++) total += Math.min(policy.baseMs * 2 ** (n - 1), policy.maxMs)
  return total
}
