/**
 * A primary and a streaming standby on this machine, for the tests of multi-host URLs and
 * failover: the primary from scripts/pg-test-server.sh, the standby a pg_basebackup -R of it.
 */
import { execFile } from 'node:child_process'
import { existsSync, readdirSync, rmSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { promisify } from 'node:util'
import { freePort, projectRoot, tempDir } from './helpers.js'

const run = promisify(execFile)
const pgScript = path.join(projectRoot, 'scripts/pg-test-server.sh')

/** The newest Debian PostgreSQL's bin folder (the one pg-test-server.sh also prefers). */
function bindir(): string {
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : []
  const found = versions
    .map((v) => path.join(root, v, 'bin'))
    .find((dir) => existsSync(path.join(dir, 'pg_ctl')))
  if (!found) throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql')
  return found
}

/** As the server's owner: PostgreSQL refuses to run as root. */
function asOwner(file: string, args: string[]) {
  const root = process.getuid?.() === 0
  return run(root ? 'runuser' : file, root ? ['-u', 'postgres', '--', file, ...args] : args, {
    timeout: 120_000,
  })
}

export interface PgPair {
  primaryPort: number
  standbyPort: number
  /** postgres://... of one server, database plant_store_test. */
  url(port: number): string
  /** pg_ctl stop of the primary: `fast` (a clean stop) or `immediate` (as a crash). */
  stopPrimary(mode: 'fast' | 'immediate'): Promise<void>
  /** A fast stop of the standby. */
  stopStandby(): Promise<void>
  /** pg_ctl promote of the standby; resolves once it takes writes. */
  promote(): Promise<void>
  stop(): Promise<void>
}

export async function startPgPair(): Promise<PgPair> {
  const bin = bindir()
  const dir = tempDir('plant-store-pair-')
  const primaryDir = path.join(dir, 'primary')
  const standbyDir = path.join(dir, 'standby')
  // mkdtemp makes it 0700: the servers run as postgres.
  if (process.getuid?.() === 0) await run('chown', ['postgres', dir])
  // PLANT_STORE_TEST_PG_PAIR_PORTS=P1,P2 keeps both servers on ports of one's own on a shared machine.
  const [primaryPort = 0, standbyPort = 0] = process.env.PLANT_STORE_TEST_PG_PAIR_PORTS
    ? process.env.PLANT_STORE_TEST_PG_PAIR_PORTS.split(',').map(Number)
    : [await freePort(), await freePort()]
  const started = await run('bash', [pgScript, 'start', primaryDir, String(primaryPort)], {
    timeout: 120_000,
  })
  const url = (port: number) =>
    started.stdout.trim().split('\n').pop()!.replace(`:${primaryPort}/`, `:${port}/`)
  await asOwner(path.join(bin, 'pg_basebackup'), [
    ...['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres'],
    ...['-D', path.join(standbyDir, 'data'), '-R', '-X', 'stream', '-c', 'fast'],
  ])
  // pg-test-server.sh writes the port and socket folder; the copied primary.conf says the primary's.
  await run('bash', [pgScript, 'start', standbyDir, String(standbyPort)], { timeout: 120_000 }).catch(
    (error: { stderr?: string }) => {
      // It cannot create its database on a standby; the server itself is up by then.
      if (!/read-only transaction/.test(error.stderr ?? '')) throw error
    },
  )
  const pgCtl = (data: string, ...args: string[]) =>
    asOwner(path.join(bin, 'pg_ctl'), ['-D', path.join(data, 'data'), '-w', '-t', '60', ...args])
  return {
    primaryPort,
    standbyPort,
    url,
    stopPrimary: async (mode) => {
      await pgCtl(primaryDir, '-m', mode, 'stop')
    },
    stopStandby: async () => {
      await pgCtl(standbyDir, '-m', 'fast', 'stop')
    },
    promote: async () => {
      await pgCtl(standbyDir, 'promote')
    },
    stop: async () => {
      for (const data of [standbyDir, primaryDir]) await run('bash', [pgScript, 'stop', data]).catch(() => {})
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** A TCP forwarder whose target can move, as a virtual IP or a DNS name moves in a failover. */
export class MovableProxy {
  private readonly sockets = new Set<net.Socket>()
  private constructor(
    private readonly server: net.Server,
    public target: number,
  ) {}

  static async start(target: number): Promise<MovableProxy> {
    const server = net.createServer()
    const proxy = new MovableProxy(server, target)
    server.on('connection', (client) => {
      const upstream = net.connect(proxy.target, '127.0.0.1')
      for (const socket of [client, upstream]) {
        proxy.sockets.add(socket)
        socket.on('close', () => proxy.sockets.delete(socket))
        socket.on('error', () => {})
      }
      client.pipe(upstream).pipe(client)
      client.on('close', () => upstream.destroy())
      upstream.on('close', () => client.destroy())
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return proxy
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy()
    await new Promise((resolve) => this.server.close(resolve))
  }
}
