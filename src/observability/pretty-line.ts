/** The request line's fields, shown in the message rather than as an object after it. */
const REQUEST_FIELDS = ['reqId', 'client', 'tokenId', 'route'] as const
const SHOWN = ['method', 'url', 'status', 'durationMs', ...REQUEST_FIELDS]

/** pino-pretty's `ignore`: the fields `prettyMessage` writes itself. */
export const PRETTY_IGNORE = ['pid', 'hostname', ...SHOWN].join(',')

/**
 * pino-pretty's `messageFormat`: a request as one line, `request GET /plants/1 200 0.41 ms
 * reqId=... client=... tokenId=... route=...`, the JSON line's fields in a person's order. Any other
 * line that carries one of those fields (an error's reqId) gets it as `key=value` after its message.
 */
export function prettyMessage(log: Record<string, unknown>, messageKey: string): string {
  const parts = [String(log[messageKey] ?? '')]
  if (log.method !== undefined && log.status !== undefined) {
    parts.push(`${String(log.method)} ${String(log.url)} ${String(log.status)}`)
    if (log.durationMs !== undefined) parts.push(`${String(log.durationMs)} ms`)
  } else {
    for (const key of ['method', 'url', 'status', 'durationMs'])
      if (log[key] !== undefined) parts.push(`${key}=${String(log[key])}`)
  }
  for (const key of REQUEST_FIELDS) if (log[key] != null) parts.push(`${key}=${String(log[key])}`)
  return parts.join(' ')
}
