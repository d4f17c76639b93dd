/**
 * Create clients for the failover suite: each sends `POST /plants` with ids of its own, one at a
 * time on a keep-alive connection, and records every acknowledged (200) id, every other answer, and
 * when each 200 came.
 */
import http from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'

/** A request that takes longer than this has hung: it is recorded as a violation. */
const HANG_MS = 15_000

interface Answer {
  status: number
  retryAfter: string | undefined
  body: string
}

function post(agent: http.Agent, base: string, token: string, id: number): Promise<Answer> {
  const body = JSON.stringify({ id, name: `plant ${id}` })
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}/plants`,
      {
        method: 'POST',
        agent,
        timeout: HANG_MS,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => (text += chunk))
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'], body: text }),
        )
        res.on('error', reject)
      },
    )
    req.on('timeout', () => req.destroy(new Error(`no answer within ${HANG_MS} ms`)))
    req.on('error', reject)
    req.end(body)
  })
}

/** Why an answer other than 200 breaks the contract, or undefined when it is a proper 503. */
function contractBreach(answer: Answer): string | undefined {
  if (answer.status !== 503) return `status ${answer.status}: ${answer.body}`
  if (!/^\d+$/.test(answer.retryAfter ?? '')) return `503 without Retry-After: ${answer.body}`
  try {
    const json = JSON.parse(answer.body) as { error?: unknown; message?: unknown }
    if (json.error !== 503 || typeof json.message !== 'string' || json.message === '') {
      return `503 not in the Error shape: ${answer.body}`
    }
  } catch {
    return `503 whose body is not JSON: ${answer.body}`
  }
  return undefined
}

export class CreateLoad {
  /** Every id answered 200. */
  readonly acked: number[] = []
  /** Answers that break the contract (not a 503 with Retry-After in the Error shape), resets, hangs. */
  readonly violations: string[] = []
  /** 503s by their code. */
  readonly unavailable = new Map<string, number>()
  slowestMs = 0
  /** Per instance: for each 200, when its request was sent and when it was answered (performance.now()). */
  private readonly oks: { sentAt: number; at: number }[][]
  private running = true
  private readonly loops: Promise<void>[]

  constructor(instances: string[], token: string, clientsPerInstance: number, nextId: () => number) {
    this.oks = instances.map(() => [])
    this.loops = instances.flatMap((base, instance) =>
      Array.from({ length: clientsPerInstance }, () => this.client(base, instance, token, nextId)),
    )
  }

  private async client(base: string, instance: number, token: string, nextId: () => number): Promise<void> {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    try {
      while (this.running) {
        const id = nextId()
        const sentAt = performance.now()
        let answer: Answer
        try {
          answer = await post(agent, base, token, id)
        } catch (error) {
          this.violations.push(`id ${id}: ${String(error)}`)
          continue
        } finally {
          this.slowestMs = Math.max(this.slowestMs, performance.now() - sentAt)
        }
        if (answer.status === 200) {
          this.acked.push(id)
          this.oks[instance]?.push({ sentAt, at: performance.now() })
        } else {
          const breach = contractBreach(answer)
          if (breach) this.violations.push(`id ${id}: ${breach}`)
          else {
            const code = String((JSON.parse(answer.body) as { code?: unknown }).code)
            this.unavailable.set(code, (this.unavailable.get(code) ?? 0) + 1)
          }
          // A client backs off a little after a 503 rather than spinning on it.
          await sleep(50)
        }
        // Paced, so that the load leaves the shared machine's cores to the cluster too.
        await sleep(5)
      }
    } finally {
      agent.destroy()
    }
  }

  get unavailableCount(): number {
    return [...this.unavailable.values()].reduce((sum, n) => sum + n, 0)
  }

  /** 200s on `instance` for requests sent at or after `since`. */
  oksSince(instance: number, since: number): number {
    return this.oks[instance]?.filter((ok) => ok.sentAt >= since).length ?? 0
  }

  /** When the last instance to recover answered its first 200 to a request sent at or after `since`. */
  recoveredAt(since: number): number | undefined {
    let latest = 0
    for (const oks of this.oks) {
      const first = oks.find((ok) => ok.sentAt >= since)
      if (!first) return undefined
      latest = Math.max(latest, first.at)
    }
    return latest
  }

  /** The longest time any instance went without answering a 200, in ms. */
  longestGapMs(): number {
    let longest = 0
    for (const oks of this.oks) {
      for (let i = 1; i < oks.length; i++)
        longest = Math.max(longest, (oks[i]?.at ?? 0) - (oks[i - 1]?.at ?? 0))
    }
    return longest
  }

  async stop(): Promise<void> {
    this.running = false
    await Promise.all(this.loops)
  }
}
