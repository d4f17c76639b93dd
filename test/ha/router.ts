/**
 * A TCP router in front of the cluster, as HAProxy routes to the leader with
 * `on-marked-down shutdown-sessions`: new connections go to the node it points at, and repointing
 * it closes every session to the old one. The failover suite uses it where DATABASE_URL takes one
 * host only.
 */
import net from 'node:net'

export class Router {
  private readonly sessions = new Set<net.Socket>()
  private constructor(
    private readonly server: net.Server,
    private target: number,
  ) {}

  static async start(targetPort: number): Promise<Router> {
    const server = net.createServer()
    const router = new Router(server, targetPort)
    server.on('connection', (client) => router.forward(client))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return router
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port
  }

  /** Sends new connections to `port` and closes every open one, as a router does when the leader moves. */
  repoint(port: number): void {
    this.target = port
    for (const socket of this.sessions) socket.destroy()
    this.sessions.clear()
  }

  private forward(client: net.Socket): void {
    const upstream = net.connect(this.target, '127.0.0.1')
    this.sessions.add(client).add(upstream)
    // Either side failing or closing ends both: the other end sees its connection close.
    const end = () => {
      client.destroy()
      upstream.destroy()
      this.sessions.delete(client)
      this.sessions.delete(upstream)
    }
    for (const socket of [client, upstream]) {
      socket.on('error', end)
      socket.on('close', end)
    }
    client.pipe(upstream).pipe(client)
  }

  async close(): Promise<void> {
    this.repoint(this.target)
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
