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
