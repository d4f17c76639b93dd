/**
 * A proxy in front of a real service that answers the next requests as a test scripts them (a
 * 503, a 429, a 500, or holding the request), and forwards every other one to the service: the
 * client's retries, timeouts and aborts meet answers the service gives only under trouble.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'

export type Scripted = { status: number; code: string; retryAfter?: string } | 'hold'

export class FaultProxy {
  readonly script: Scripted[] = []
  /** Every request that reached the proxy: method, path and when (ms since the epoch). */
  readonly seen: { method: string; path: string; at: number }[] = []
  private constructor(
    private readonly server: http.Server,
    private readonly target: string,
  ) {}

  static async start(target: string): Promise<FaultProxy> {
    const server = http.createServer()
    const proxy = new FaultProxy(server, target)
    server.on('request', (req, res) => void proxy.handle(req, res))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return proxy
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    this.seen.push({ method: req.method ?? '', path: req.url ?? '', at: Date.now() })
    const next = this.script.shift()
    if (next === 'hold') return
    if (next) {
      const headers: Record<string, string> = { 'content-type': 'application/json; charset=utf-8' }
      if (next.retryAfter !== undefined) headers['retry-after'] = next.retryAfter
      const body = { error: next.status, message: `scripted ${next.status}`, code: next.code }
      res.writeHead(next.status, headers).end(JSON.stringify(body))
      return
    }
    const headers: Record<string, string> = {}
    for (const name of ['authorization', 'content-type']) {
      const value = req.headers[name]
      if (typeof value === 'string') headers[name] = value
    }
    const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined
    const answer = await fetch(`${this.target}${req.url}`, { method: req.method, headers, body })
    const forwarded: Record<string, string> = {}
    for (const name of ['content-type', 'link', 'x-request-id', 'www-authenticate']) {
      const value = answer.headers.get(name)
      if (value !== null) forwarded[name] = value
    }
    res.writeHead(answer.status, forwarded).end(Buffer.from(await answer.arrayBuffer()))
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
