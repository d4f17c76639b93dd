/**
 * libpq's multi-host connection URL, `postgres://u@h1:p1,h2:p2/db?target_session_attrs=read-write`,
 * which pg 8.23 does not read (brianc/node-postgres#1470, #2781; pull #3643 would add it): it is
 * split here into one single-host URL per host, and the pool picks among them (session-attrs.ts).
 */

/** libpq's values for `target_session_attrs`; `any` when absent. */
export const SESSION_ATTRS = [
  'any',
  'read-write',
  'read-only',
  'primary',
  'standby',
  'prefer-standby',
] as const
export type SessionAttrs = (typeof SESSION_ATTRS)[number]

export interface HostList {
  /** `host:port` of each host, in the order given, for messages; '' for libpq's default host. */
  hosts: string[]
  /** One URL per host, for pg: the same user, database and parameters, without target_session_attrs. */
  urls: string[]
  targetSessionAttrs: SessionAttrs
}

const DEFAULT_PORT = '5432'
const URL_PARTS = /^(postgres(?:ql)?:\/\/)(?:([^@/?#]*)@)?([^/?#@]*)([/?#].*)?$/s
const HOST = /^(\[[^\]]*\]|[^:[\]]*)(?::([^:]*))?$/

/**
 * Splits and checks `raw` (already known to start with postgres://); throws an Error whose message
 * names `name` (the variable), the host by its place and the rule, e.g. "DATABASE_URL host 2 port
 * must be between 1 and 65535, got 70000".
 */
export function parseHostList(raw: string, name: string): HostList {
  const invalid = `${name} is not a valid URL (percent-encode special characters in the password)`
  const parts = URL_PARTS.exec(raw)
  if (!parts) throw new Error(invalid)
  const [, scheme = '', userinfo, hostPart = '', rest = ''] = parts
  const entries = hostPart.split(',')
  const many = entries.length > 1
  const hosts: string[] = []
  for (const [i, entry] of entries.entries()) {
    const which = many ? `${name} host ${i + 1}` : `${name} host`
    const match = HOST.exec(entry)
    // One empty host is libpq's default (a socket, or ?host=...), as `postgres:///db` says.
    if (!many && entry === '') {
      hosts.push('')
      continue
    }
    if (!match || !match[1]) throw new Error(`${which} must be a host name or address, got "${entry}"`)
    const port = match[2] ?? DEFAULT_PORT
    if (!/^\d{1,6}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
      const got = port === '' ? 'nothing' : port
      throw new Error(`${many ? which : name} port must be between 1 and 65535, got ${got}`)
    }
    hosts.push(`${match[1]}:${Number(port)}`)
  }
  let query: URLSearchParams
  let path: string
  try {
    const url = new URL(`${scheme}${userinfo === undefined ? '' : `${userinfo}@`}${hosts[0]}${rest}`)
    query = url.searchParams
    path = url.pathname
  } catch {
    throw new Error(invalid)
  }
  const attrs = query.get('target_session_attrs') ?? 'any'
  if (!(SESSION_ATTRS as readonly string[]).includes(attrs))
    throw new Error(`${name} target_session_attrs must be one of ${SESSION_ATTRS.join(', ')}; got "${attrs}"`)
  query.delete('target_session_attrs')
  const search = query.size > 0 ? `?${query.toString()}` : ''
  const auth = userinfo === undefined ? '' : `${userinfo}@`
  return {
    hosts,
    urls: hosts.map((host) => `${scheme}${auth}${host}${path}${search}`),
    targetSessionAttrs: attrs as SessionAttrs,
  }
}
