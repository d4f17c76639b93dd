import { randomBytes } from 'node:crypto'
import { loadConfig } from '../config.js'
import { plantJson } from '../storage/plant-json.js'
import { sendWebhook } from '../webhooks/send-webhook.js'
import type { OpenStore } from './open-store.js'
import { CommandError, print, printError, UsageError } from './output.js'
import { counted } from './progress.js'

/** How much of the receiver's answer `webhooks test` prints. */
const ANSWER_BYTES = 4096

/**
 * `webhooks retry ID...|--failed`. It goes through the outbox, as every send does: the delivery
 * is pending again and due now, and the delivery worker of a running `serve` sends it as its next
 * attempt, under its webhook-id, with the lease that keeps two instances from sending it twice.
 * Sending from here instead would race a worker and bypass the attempt history.
 */
export async function retry(
  open: OpenStore,
  positionals: string[],
  values: { failed?: boolean },
): Promise<void> {
  if ((values.failed === true) === positionals.length > 0)
    throw new UsageError('webhooks retry needs delivery IDs or --failed, not both')
  const ids = values.failed ? undefined : [...new Set(positionals)]
  const requeued = await (await open()).requeueFailedDeliveries(ids, new Date())
  for (const id of requeued) print(`requeued ${id}`)
  printError(
    requeued.length === 1
      ? '1 delivery is due now; a running `plant-store serve` sends it within WEBHOOK_POLL_MS'
      : `${counted(requeued.length, 'delivery', 'deliveries')} are due now; a running \`plant-store serve\` sends them within WEBHOOK_POLL_MS`,
  )
  const missed = (ids ?? []).filter((id) => !requeued.includes(id))
  if (missed.length > 0) {
    throw new CommandError(
      `not requeued: ${missed.join(', ')}: no failed delivery with that id whose subscription still exists (see webhooks deliveries --failed)`,
    )
  }
}

/**
 * `webhooks test SUBSCRIPTION_ID`: a sample event, signed with the subscription's secret and sent
 * by the worker's own send function (same headers, timeout and destination rules), now. It is not
 * stored: its webhook-id starts `msg_test_` and its plant does not exist.
 */
export async function sendTest(open: OpenStore, id: string): Promise<void> {
  const config = loadConfig()
  const subscription = (await (await open()).listSubscriptions()).find((s) => s.id === id)
  if (!subscription) throw new CommandError(`no webhook subscription with id ${id}`)
  const delivery = {
    id: `msg_test_${randomBytes(12).toString('hex')}`,
    url: subscription.url,
    secret: subscription.secret,
    payload: plantJson({ id: 0n, name: 'plant-store webhooks test', tag: 'test' }),
  }
  printError(`sending ${delivery.id} to ${subscription.url}`)
  const sent = await sendWebhook(
    delivery,
    { timeoutMs: config.webhookTimeoutMs, allowPrivate: config.webhookAllowPrivate },
    new AbortController(),
    ANSWER_BYTES,
  )
  if (sent.status === null)
    throw new CommandError(`no answer from ${subscription.url}: ${sent.error ?? 'unknown'}`)
  print(`HTTP ${sent.status}`)
  if (sent.answer) print(sent.answer)
  if (sent.error) throw new CommandError(`the receiver did not acknowledge the test event (${sent.error})`)
}
