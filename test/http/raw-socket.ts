import net from 'node:net'

export interface RawExchange {
  /** Everything the server sent, as latin1 text. */
  received: string
  /** Whether the server closed the connection before `waitMs` ran out. */
  closed: boolean
}

/**
 * Writes `data` on a fresh connection and collects what comes back until the server closes it, or
 * `waitMs` passes (then `closed` is false). Not a test file: the HTTP tests share it.
 */
export function rawExchange(url: string, data: string | Buffer, waitMs = 10_000): Promise<RawExchange> {
  return new Promise((resolve) => {
    const socket = net.connect(Number(new URL(url).port), '127.0.0.1')
    let received = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      received += chunk
    })
    // A reset after the answers is the server refusing to read more; what arrived still counts.
    socket.on('error', () => {})
    const timer = setTimeout(() => {
      socket.destroy()
      resolve({ received, closed: false })
    }, waitMs)
    socket.on('close', () => {
      clearTimeout(timer)
      resolve({ received, closed: true })
    })
    socket.write(data)
  })
}

/** The status lines in what a server sent, in order (`HTTP/1.1 401`, ...). */
export const statusLines = (received: string): string[] => received.match(/^HTTP\/1\.[01] \d{3}/gm) ?? []
