import { randomBase62 } from '../auth/token-format.js'
import { loadConfig } from '../config.js'
import type { Delivery, DeliveryAttempt, Storage } from '../storage/storage.js'
import type { OpenStore } from './open-store.js'
import { literalRefusal } from '../webhooks/destination-policy.js'
import { generateWebhookSecret } from '../webhooks/signer.js'
import { CommandError, print, printError, printSecret, table, UsageError } from './output.js'

export const DEFAULT_DELIVERY_LIMIT = 50
/** Attempts shown per delivery, newest first: enough to see how a failure changed. */
export const DEFAULT_ATTEMPTS_SHOWN = 5

const MAX_URL_LENGTH = 2048

/**
 * An absolute http(s) URL without credentials, normalised; unless `allowPrivate`, not one whose
 * host is a non-public address written literally (names are checked at each send).
 */
export function parseSubscriberUrl(raw: string, allowPrivate: boolean): string {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new UsageError(`"${raw}" is not an absolute URL; use e.g. https://example.com/hooks/plants`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`webhook URL must use http or https, got "${url.protocol.replace(/:$/, '')}"`)
  }
  // The URL parser repairs what is more likely a typo: `http:///x` and `http:x` become http://x/.
  if (!url.hostname || !/^https?:\/\/[^/\\?#]/i.test(raw.trim()))
    throw new UsageError(`webhook URL "${raw}" must name a host right after ${url.protocol}//`)
  // Port 0 is no destination: every delivery would fail to connect.
  if (url.port === '0') throw new UsageError('webhook URL port must be between 1 and 65535, got 0')
  if (url.username || url.password) {
    throw new UsageError('webhook URL must not contain credentials; verify the signature instead')
  }
  // A fragment is never sent in a request: the subscriber would not get what was written.
  if (raw.includes('#')) throw new UsageError(`webhook URL must not contain a fragment (#), got "${raw}"`)
  // A subscriber URL is configuration, not data: a bound keeps `webhooks list` readable and the
  // outbox rows small (a probe added a 5,000-character one).
  if (url.href.length > MAX_URL_LENGTH) {
    throw new UsageError(`webhook URL must be at most ${MAX_URL_LENGTH} characters, got ${url.href.length}`)
  }
  const refusal = allowPrivate ? undefined : literalRefusal(url)
  if (refusal) throw new UsageError(`webhook URL ${url.href}: ${refusal}`)
  return url.href
}

const describeAttempt = (attempt: DeliveryAttempt) => ({
  attempt: attempt.attempt,
  at: attempt.at.toISOString(),
  httpStatus: attempt.status,
  error: attempt.error,
})

const describeDelivery = (delivery: Delivery, attempts: DeliveryAttempt[]) => ({
  id: delivery.id,
  subscription: delivery.subscriptionId,
  // A string, so the id stays exact for any JSON reader.
  plantId: delivery.plantId.toString(),
  status: delivery.status,
  attempts: delivery.attempts,
  lastStatus: delivery.lastStatus,
  lastError: delivery.lastError,
  lastAttempt: delivery.lastAttemptAt?.toISOString() ?? null,
  nextAttempt: delivery.status === 'pending' ? delivery.nextAttemptAt.toISOString() : null,
  created: delivery.createdAt.toISOString(),
  recentAttempts: attempts.map(describeAttempt),
})

type DeliveryView = ReturnType<typeof describeDelivery>

/**
 * The table has a row per attempt shown, newest first, under its delivery's columns; a delivery
 * with none shown gets one row. A delivery's own last error that no attempt shown explains (a
 * removed subscription, or `--attempts 0`) gets a row of its own, without an attempt number.
 */
function attemptRows(delivery: DeliveryView): Record<string, string>[] {
  const head = {
    id: delivery.id,
    subscription: delivery.subscription,
    plantId: delivery.plantId,
    status: delivery.status,
    nextAttempt: delivery.nextAttempt ?? '',
  }
  const rows = delivery.recentAttempts.map((attempt) => ({
    ...head,
    attempt: `${attempt.attempt}/${delivery.attempts}`,
    at: attempt.at,
    httpStatus: attempt.httpStatus === null ? '' : String(attempt.httpStatus),
    error: attempt.error ?? '',
  }))
  const newest = delivery.recentAttempts[0]
  if (delivery.lastError !== null && newest?.error !== delivery.lastError) {
    rows.unshift({ ...head, attempt: '', at: '', httpStatus: '', error: delivery.lastError })
  }
  return rows.length > 0 ? rows : [{ ...head, attempt: '', at: '', httpStatus: '', error: '' }]
}

/** A whole number from `min` to `max`, or a usage error naming the option. */
function wholeNumber(option: string, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new UsageError(`${option} must be a whole number from ${min} to ${max}, got "${raw}"`)
  }
  return Number(raw)
}

/** A subscription to `url` with a fresh id and signing secret, as `webhooks add` stores it. */
export function newSubscription(url: string) {
  return { id: `sub_${randomBase62(16)}`, url, secret: generateWebhookSecret(), createdAt: new Date() }
}

/** `webhooks add URL`. */
export async function addSubscription(open: OpenStore, raw: string): Promise<void> {
  const url = parseSubscriberUrl(raw, loadConfig().webhookAllowPrivate)
  const subscription = newSubscription(url)
  const { id, secret } = subscription
  const storage = await open({ create: true })
  // Allowed, since it is how a signing secret is rotated (docs/webhooks.md), but never unnoticed.
  const sameUrl = (await storage.listSubscriptions()).filter((s) => s.url === url).map((s) => s.id)
  await storage.addSubscription(subscription)
  // The secret alone on stdout, so `SECRET=$(plant-store webhooks add ...)` works; it is shown once.
  await printSecret(secret, 'the signing secret', async () => {
    await storage.removeSubscription(id)
    return `subscription ${id} is removed: add it again`
  })
  printError(`added subscription ${id} for ${url}; keep the signing secret, it is not shown again`)
  if (sameUrl.length > 0)
    printError(
      `note: ${sameUrl.join(', ')} also sends to this URL: each event goes to it once per subscription`,
    )
}

/** `webhooks list`. */
export async function listSubscriptions(open: OpenStore, values: { json?: boolean }): Promise<void> {
  // Never the secret.
  const subscriptions = (await (await open()).listSubscriptions()).map((s) => ({
    id: s.id,
    url: s.url,
    created: s.createdAt.toISOString(),
  }))
  if (values.json) {
    print(JSON.stringify(subscriptions, null, 2))
    return
  }
  print(table(subscriptions, ['id', 'url', 'created']))
}

/** `webhooks remove ID`. */
export async function removeSubscription(open: OpenStore, id: string): Promise<void> {
  if (!(await (await open()).removeSubscription(id)))
    throw new CommandError(`no webhook subscription with id ${id}`)
  print(`removed ${id}`)
}

/** The deliveries as `webhooks deliveries --json` shows them, each with its newest attempts first. */
export async function deliveryRows(
  storage: Storage,
  options: { failedOnly: boolean; limit: number; attemptsEach: number },
): Promise<DeliveryView[]> {
  const found = await storage.listDeliveries({ failedOnly: options.failedOnly, limit: options.limit })
  const ids = found.map((delivery) => delivery.id)
  const attempts = options.attemptsEach === 0 ? [] : await storage.listAttempts(ids, options.attemptsEach)
  const attemptsOf = new Map<string, DeliveryAttempt[]>()
  for (const attempt of attempts) {
    const list = attemptsOf.get(attempt.deliveryId) ?? []
    list.push(attempt)
    attemptsOf.set(attempt.deliveryId, list)
  }
  return found.map((delivery) =>
    describeDelivery(
      delivery,
      (attemptsOf.get(delivery.id) ?? []).sort((a, b) => b.attempt - a.attempt),
    ),
  )
}

/** `webhooks deliveries`. */
export async function listDeliveries(
  open: OpenStore,
  values: { failed?: boolean; limit?: string; attempts?: string; json?: boolean },
): Promise<void> {
  const limit =
    values.limit === undefined ? DEFAULT_DELIVERY_LIMIT : wholeNumber('--limit', values.limit, 1, 1000)
  const each =
    values.attempts === undefined
      ? DEFAULT_ATTEMPTS_SHOWN
      : wholeNumber('--attempts', values.attempts, 0, 1000)
  const rows = await deliveryRows(await open(), {
    failedOnly: values.failed === true,
    limit,
    attemptsEach: each,
  })
  if (values.json) {
    print(JSON.stringify(rows, null, 2))
    return
  }
  print(
    table(rows.flatMap(attemptRows), [
      'id',
      'subscription',
      'plantId',
      'status',
      'attempt',
      'at',
      'httpStatus',
      'error',
      'nextAttempt',
    ]),
  )
}
