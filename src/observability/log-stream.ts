import pino from 'pino'

/**
 * Where the JSON log lines go: the lines logged during one turn of the event loop are written to
 * stdout together, with one system call, at the end of that turn (setImmediate). Under load many
 * requests finish per turn, and a write per line cost more CPU than making the line. Writes stay
 * synchronous (pino's SonicBoom, which retries a full pipe), so nothing waits in a thread pool
 * the store's fsyncs use; what one turn logged is written before the process exits, however it
 * exits short of a kill.
 */
export function turnBatched(dest: number | string): TurnBatched {
  const out = pino.destination({ dest, sync: true })
  let lines: string[] = []
  let scheduled = false
  const flush = () => {
    scheduled = false
    if (lines.length === 0) return
    const text = lines.length === 1 ? (lines[0] as string) : lines.join('')
    lines = []
    out.write(text)
  }
  process.on('exit', flush)
  return {
    write(line: string) {
      lines.push(line)
      if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    },
    flush(done?: () => void) {
      flush()
      done?.()
    },
  }
}

type TurnBatched = pino.DestinationStream & { flush(done?: () => void): void }

let stdout: TurnBatched | undefined

/** One per process, shared by every app built in it (tests build many). */
export const turnBatchedStdout = (): TurnBatched => (stdout ??= turnBatched(1))

let second = -1
let prefix = ''

/**
 * pino's `timestamp`: `,"time":"2026-01-31T12:34:56.789Z"`, as pino's isoTime writes it, with the
 * part up to the second formatted once per second instead of a Date and toISOString per line.
 */
export function isoTime(): string {
  const now = Date.now()
  const ms = now % 1000
  if (now - ms !== second) {
    second = now - ms
    prefix = `,"time":"${new Date(second).toISOString().slice(0, 20)}`
  }
  return `${prefix}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`
}
