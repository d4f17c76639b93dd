import type { Config } from '../config.js'
import { parseHostList } from '../config/postgres-host-list.js'

/**
 * Where the store is, for the start-up log: the SQLite file's absolute path, or PostgreSQL's host,
 * port, database and user (never the password), so an operator sees which store a process uses.
 */
export function storeLocation(config: Pick<Config, 'databaseUrl' | 'dbPath'>): {
  fields: Record<string, string>
  message: string
} {
  if (!config.databaseUrl) {
    return {
      fields: { store: 'sqlite', path: config.dbPath },
      message: `store: SQLite file ${config.dbPath}`,
    }
  }
  const list = parseHostList(config.databaseUrl, 'DATABASE_URL')
  const url = new URL(list.urls[0] as string)
  // A host may also come from the query (?host=/run/postgresql for a socket), as libpq allows.
  let host = url.hostname || url.searchParams.get('host') || 'localhost'
  let port = url.port || '5432'
  if (list.hosts.length > 1) {
    host = list.hosts.join(',')
    port = ''
  }
  const database = decodeURIComponent(url.pathname.slice(1)) || decodeURIComponent(url.username) || 'postgres'
  const fields = { store: 'postgres', host, port, database, user: decodeURIComponent(url.username) }
  const where = port ? `${host}:${port}` : `${host} (target_session_attrs=${list.targetSessionAttrs})`
  return { fields, message: `store: PostgreSQL database "${database}" on ${where}` }
}
