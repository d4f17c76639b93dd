import { parseArgs } from 'node:util'
import { randomBase62 } from '../auth/token-format.js'
import type { Delivery, Storage } from '../storage/storage.js'
import { generateWebhookSecret } from '../webhooks/signer.js'
import { CommandError, print, table, UsageError } from './output.js'

export const webhooksUsage = `plant-store webhooks add URL
plant-store webhooks list [--json]
plant-store webhooks remove ID
plant-store webhooks deliveries [--failed] [--limit N] [--json]`

const DEFAULT_DELIVERY_LIMIT = 50

const MAX_URL_LENGTH = 2048

/** An absolute http(s) URL without credentials (fetch refuses those), normalised. */
export function parseSubscriberUrl(raw: string): string {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new UsageError(`"${raw}" is not an absolute URL; use e.g. https://example.com/hooks/plants`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`webhook URL must use http or https, got "${url.protocol.replace(/:$/, '')}"`)
  }
  if (!url.hostname) throw new UsageError(`webhook URL "${raw}" has no host`)
  if (url.username || url.password) {
    throw new UsageError('webhook URL must not contain credentials; verify the signature instead')
  }
  url.hash = ''
  // A subscriber URL is configuration, not data: a bound keeps `webhooks list` readable and the
  // outbox rows small (a probe added a 5,000-character one).
  if (url.href.length > MAX_URL_LENGTH) {
    throw new UsageError(`webhook URL must be at most ${MAX_URL_LENGTH} characters, got ${url.href.length}`)
  }
  return url.href
}

const describeDelivery = (delivery: Delivery) => ({
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
})

async function add(storage: Storage, args: string[]): Promise<void> {
  const { positionals } = parseArgs({ args, allowPositionals: true, strict: true })
  const raw = positionals[0]
  if (!raw || positionals.length > 1) throw new UsageError('webhooks add needs exactly one URL')
  const url = parseSubscriberUrl(raw)
  const id = `sub_${randomBase62(16)}`
  const secret = generateWebhookSecret()
  await storage.addSubscription({ id, url, secret, createdAt: new Date() })
  // The secret alone on stdout, so `SECRET=$(plant-store webhooks add ...)` works; it is shown once.
  print(secret)
  process.stderr.write(
    `added subscription ${id} for ${url}; keep the signing secret, it is not shown again\n`,
  )
}

async function list(storage: Storage, args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { json: { type: 'boolean' } }, strict: true })
  // Never the secret.
  const subscriptions = (await storage.listSubscriptions()).map((s) => ({
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

async function remove(storage: Storage, args: string[]): Promise<void> {
  const { positionals } = parseArgs({ args, allowPositionals: true, strict: true })
  const id = positionals[0]
  if (!id || positionals.length > 1) throw new UsageError('webhooks remove needs exactly one subscription ID')
  if (!(await storage.removeSubscription(id))) throw new CommandError(`no webhook subscription with id ${id}`)
  print(`removed ${id}`)
}

async function deliveries(storage: Storage, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { failed: { type: 'boolean' }, limit: { type: 'string' }, json: { type: 'boolean' } },
    strict: true,
  })
  let limit = DEFAULT_DELIVERY_LIMIT
  if (values.limit !== undefined) {
    if (!/^\d+$/.test(values.limit) || Number(values.limit) < 1 || Number(values.limit) > 1000) {
      throw new UsageError(`--limit must be a whole number from 1 to 1000, got "${values.limit}"`)
    }
    limit = Number(values.limit)
  }
  const rows = (await storage.listDeliveries({ failedOnly: values.failed === true, limit })).map(
    describeDelivery,
  )
  if (values.json) {
    print(JSON.stringify(rows, null, 2))
    return
  }
  print(
    table(
      rows.map((d) => ({
        ...d,
        attempts: String(d.attempts),
        lastStatus: d.lastStatus === null ? '' : String(d.lastStatus),
        lastError: d.lastError ?? '',
        lastAttempt: d.lastAttempt ?? '',
        nextAttempt: d.nextAttempt ?? '',
      })),
      [
        'id',
        'subscription',
        'plantId',
        'status',
        'attempts',
        'lastStatus',
        'lastError',
        'nextAttempt',
        'created',
      ],
    ),
  )
}

export async function webhooksCommand(storage: Storage, args: string[]): Promise<void> {
  const [action, ...rest] = args
  if (action === 'add') return add(storage, rest)
  if (action === 'list') return list(storage, rest)
  if (action === 'remove') return remove(storage, rest)
  if (action === 'deliveries') return deliveries(storage, rest)
  throw new UsageError(`unknown webhooks command "${action ?? ''}"`)
}
