/**
 * What the webhook tests share: a subscriber that verifies every request with the Standard
 * Webhooks reference library, and a service on a fresh store with short retry budgets.
 */
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { TestContext } from 'node:test'
import { Webhook } from 'standardwebhooks'
import { DEFAULT_SCOPES } from '../../src/auth/token-format.js'
import {
  DEFAULT_ATTEMPTS_SHOWN,
  DEFAULT_DELIVERY_LIMIT,
  deliveryRows,
  newSubscription,
} from '../../src/cli/webhooks.js'
import {
  issueToken,
  openStore,
  runCli,
  type SpawnedService,
  serviceEnv,
  spawnService,
  type StoreKind,
  stopService,
  waitFor,
} from '../helpers.js'
import { request } from '../http-client.js'
import type { Storage } from '../../src/storage/storage.js'

export const FAST: Record<string, string> = {
  LOG_LEVEL: 'info',
  // The receivers listen on loopback, which is refused by default.
  WEBHOOK_ALLOW_PRIVATE: 'true',
  WEBHOOK_POLL_MS: '50',
  WEBHOOK_BACKOFF_BASE_MS: '50',
  WEBHOOK_BACKOFF_MAX_MS: '200',
  WEBHOOK_MAX_ATTEMPTS: '3',
  // Receivers answer from the test process, which runs several tests at once on a loaded machine:
  // a send answered at once must not time out. Tests of a timeout set their own.
  WEBHOOK_TIMEOUT_MS: '2000',
  WEBHOOK_LEASE_MS: '4000',
}

export interface Received {
  method: string
  webhookId: string
  timestamp: string
  signature: string
  contentType: string
  body: string
  /** null when the signature checked out with the `standardwebhooks` verifier. */
  verifyError: string | null
  /** What the receiver answered; undefined while it holds the request. */
  answered?: number
  /** The sender's end of the connection, to tell which process sent it. */
  remotePort: number
}

export type Answer = number | 'hold'

/**
 * A subscriber: a real HTTP server that verifies every request with the Standard Webhooks
 * reference library (not our signer) and answers as the test says, or holds the request open.
 */
export class Receiver {
  readonly received: Received[] = []
  secret = ''
  answer: (n: number, received: Received) => Answer = () => 200
  private readonly held: { response: http.ServerResponse; received: Received }[] = []

  private constructor(private readonly server: http.Server) {}

  static async start(port = 0): Promise<Receiver> {
    const server = http.createServer()
    const receiver = new Receiver(server)
    server.on('request', (req, res) => receiver.handle(req, res))
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => resolve())
    })
    return receiver
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks/plants`
  }

  /** Requests this receiver holds without having answered. */
  get holding(): Received[] {
    return this.held.filter((h) => !h.response.destroyed).map((h) => h.received)
  }

  get ids(): string[] {
    return this.received.map((r) => r.webhookId)
  }

  /** Distinct webhook-ids answered with a 2xx, each with the request answered so. */
  acknowledged(): Map<string, Received> {
    const acknowledged = new Map<string, Received>()
    for (const r of this.received) if (r.answered && r.answered < 300) acknowledged.set(r.webhookId, r)
    return acknowledged
  }

  /** Answers every request held so far. */
  release(status = 200): void {
    for (const { response, received } of this.held.splice(0)) {
      if (response.destroyed) continue
      received.answered = status
      response.writeHead(status).end()
    }
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      const header = (name: string) => String(req.headers[name] ?? '')
      const received: Received = {
        method: req.method ?? '',
        webhookId: header('webhook-id'),
        timestamp: header('webhook-timestamp'),
        signature: header('webhook-signature'),
        contentType: header('content-type'),
        body,
        verifyError: null,
        remotePort: req.socket.remotePort ?? 0,
      }
      try {
        new Webhook(this.secret).verify(
          body,
          {
            'webhook-id': received.webhookId,
            'webhook-timestamp': received.timestamp,
            'webhook-signature': received.signature,
          },
          { jsonParse: false },
        )
      } catch (error) {
        received.verifyError = error instanceof Error ? error.message : String(error)
      }
      this.received.push(received)
      const answer = this.answer(this.received.length, received)
      if (answer === 'hold') {
        this.held.push({ response: res, received })
        return
      }
      received.answered = answer
      res.writeHead(answer, { 'content-type': 'text/plain' }).end('ok')
    })
  }

  /** Answers what it still holds with 503, then stops. */
  async close(): Promise<void> {
    this.release(503)
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

export interface DeliveryRow {
  id: string
  subscription: string
  plantId: string
  status: 'pending' | 'delivered' | 'failed'
  attempts: number
  lastStatus: number | null
  lastError: string | null
  lastAttempt: string | null
  nextAttempt: string | null
  created: string
  /** Newest first. */
  recentAttempts: { attempt: number; at: string; httpStatus: number | null; error: string | null }[]
}

/** A subscription to `url` stored as `webhooks add` stores it; returns its signing secret. */
async function storeSubscription(storage: Storage, url: string): Promise<string> {
  const subscription = newSubscription(url)
  await storage.addSubscription(subscription)
  return subscription.secret
}

/** Subscriptions to `urls` stored from this process, for a test of no CLI. */
export async function storeSubscriptions(env: Record<string, string>, urls: string[]): Promise<void> {
  const storage = await openStore(env)
  try {
    for (const url of urls) await storeSubscription(storage, url)
  } finally {
    await storage.close()
  }
}

/** A fresh store, the service running on it, an API token, and cleanup registered on `t`. */
export async function setupWebhooks(store: StoreKind, t: TestContext, extra: Record<string, string> = {}) {
  const env = await serviceEnv(store, { ...FAST, ...extra })
  // The store as this process opens it, for the token, reads and setup that test no CLI; closed
  // after the test.
  const storage = await openStore(env)
  const token = await issueToken(storage, DEFAULT_SCOPES, null, 'webhooks-test')
  const services: SpawnedService[] = []
  const receivers: Receiver[] = []
  const ctx = {
    env,
    token,
    service: undefined as unknown as SpawnedService,
    async start(): Promise<SpawnedService> {
      const service = await spawnService(env)
      services.push(service)
      ctx.service = service
      return service
    },
    async receiver(port = 0): Promise<Receiver> {
      const receiver = await Receiver.start(port)
      receivers.push(receiver)
      return receiver
    },
    /** `webhooks add URL`, as an operator runs it; returns the secret it prints. */
    async addSubscriber(url: string): Promise<string> {
      const result = await runCli(['webhooks', 'add', url], env)
      assert.equal(result.code, 0, result.stderr)
      const secret = result.stdout.trim()
      assert.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/)
      return secret
    },
    /**
     * A subscription stored from this process, as `webhooks add` stores it; returns its secret. For
     * the tests that test no CLI: a CLI process costs some 0.5 CPU seconds.
     */
    async addSubscriberHere(url: string): Promise<string> {
      return storeSubscription(storage, url)
    },
    /** Subscribes the receiver (from this process) and hands it the secret to verify with. */
    async subscribe(receiver: Receiver): Promise<void> {
      receiver.secret = await ctx.addSubscriberHere(receiver.url)
    },
    post(body: string) {
      return request('POST', `${ctx.service.url}/plants`, { token, body })
    },
    /** `webhooks deliveries --json`, as an operator runs it. */
    async deliveries(...flags: string[]): Promise<DeliveryRow[]> {
      const result = await runCli(['webhooks', 'deliveries', '--json', ...flags], env)
      assert.equal(result.code, 0, result.stderr)
      return JSON.parse(result.stdout) as DeliveryRow[]
    },
    /**
     * What `webhooks deliveries --json` prints, read in this process through the same function:
     * for the polls, each of which would otherwise start a CLI process (0.4 CPU seconds).
     */
    async stored(failedOnly = false): Promise<DeliveryRow[]> {
      return deliveryRows(storage, {
        failedOnly,
        limit: DEFAULT_DELIVERY_LIMIT,
        attemptsEach: DEFAULT_ATTEMPTS_SHOWN,
      })
    },
    /** Waits until exactly `count` deliveries have failed for good, and returns them. */
    failed(count: number): Promise<DeliveryRow[]> {
      return waitFor(`${count} failed deliveries`, async () => {
        const rows = await ctx.stored(true)
        return rows.length === count ? rows : undefined
      })
    },
    output: () => services.map((s) => s.output()).join('\n'),
  }
  t.after(async () => {
    for (const receiver of receivers) receiver.release(503)
    await Promise.all(services.map(stopService))
    await Promise.all(receivers.map((r) => r.close()))
    await storage.close()
  })
  return ctx
}
