import pg from 'pg'
import type { HostList, SessionAttrs } from '../../config/postgres-host-list.js'

/**
 * A host that answered but is not what `target_session_attrs` asks for (a standby for read-write):
 * nothing was sent to it, so any call may be tried again on the next host.
 */
export class HostRefusedError extends Error {
  override name = 'HostRefusedError'
}

/**
 * Which host of a HostList the pool's next connection goes to. A new connection goes to the host
 * that last gave a good one; one that fails to connect, or answers with the wrong role, moves the
 * choice to the next host in the list order, and the guard (guard.ts) tries the call again after its
 * backoff. libpq starts every connection at the first host instead; starting at the
 * last good one spares each new connection a wait on a dead first host.
 */
export class HostChooser {
  private current = 0
  /** Connections failed or refused since the last good one: a whole round means none is fit. */
  private missesInRow = 0

  constructor(
    readonly list: HostList,
    /** The variable the list came from, for messages. */
    private readonly variable = 'DATABASE_URL',
  ) {}

  pick(): number {
    return this.current
  }

  missed(target: number): void {
    this.missesInRow++
    if (this.current === target) this.current = (target + 1) % this.list.hosts.length
  }

  hit(target: number): void {
    this.missesInRow = 0
    this.current = target
  }

  /**
   * Throws HostRefusedError when the connected host is not what `target_session_attrs` asks for,
   * judged as libpq does: read-write/read-only by `transaction_read_only`, primary/standby by
   * `pg_is_in_recovery()`; prefer-standby takes a primary only after a round found no standby.
   */
  async check(client: pg.ClientBase, target: number): Promise<void> {
    const attrs = this.list.targetSessionAttrs
    if (attrs !== 'any') {
      const { rows } = await client.query(
        "SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') = 'on' AS read_only",
      )
      const { standby, read_only: readOnly } = rows[0] as { standby: boolean; read_only: boolean }
      const fit = fits(attrs, standby, readOnly, this.missesInRow >= this.list.hosts.length - 1)
      if (!fit) {
        this.missed(target)
        const role = standby ? 'a standby' : readOnly ? 'a read-only primary' : 'a primary'
        throw new HostRefusedError(
          `${this.list.hosts[target]} is ${role}, not what ${this.variable} target_session_attrs=${attrs} asks for`,
        )
      }
    }
    this.hit(target)
  }
}

function fits(attrs: SessionAttrs, standby: boolean, readOnly: boolean, lastOfRound: boolean): boolean {
  switch (attrs) {
    case 'read-write':
      return !readOnly
    case 'read-only':
      return readOnly
    case 'primary':
      return !standby
    case 'standby':
      return standby
    case 'prefer-standby':
      return standby || lastOfRound
    default:
      return true
  }
}

/**
 * A pg.Client (the pool's documented `Client` option) bound to the chosen host's URL; a failed
 * connect moves the choice on. The role check runs in the pool's `onConnect` (HostChooser.check).
 */
export function clientOf(chooser: HostChooser): new (config: pg.ClientConfig) => pg.Client {
  return class HostClient extends pg.Client {
    readonly target: number

    constructor(config: pg.ClientConfig) {
      const target = chooser.pick()
      super({ ...config, connectionString: chooser.list.urls[target] })
      this.target = target
    }

    override connect(): Promise<pg.Client>
    override connect(callback: (err: Error) => void): void
    override connect(callback?: (err: Error) => void): Promise<pg.Client> | void {
      if (!callback) {
        return super.connect().catch((error: unknown) => {
          chooser.missed(this.target)
          throw error
        })
      }
      super.connect((error: Error) => {
        if (error) chooser.missed(this.target)
        callback(error)
      })
    }
  }
}

/** The host index a client of clientOf was bound to. */
export function targetOf(client: pg.ClientBase): number {
  return (client as { target?: number }).target ?? 0
}
