import type { Config } from '../config.js'
import { parseHostList } from '../config/postgres-host-list.js'

/** A PostgreSQL URL's host(s), port, database and user, never the password. */
function postgresPlace(raw: string, variable: string) {
  const list = parseHostList(raw, variable)
  const url = new URL(list.urls[0] as string)
  // A host may also come from the query (?host=/run/postgresql for a socket), as libpq allows.
  let host = url.hostname || url.searchParams.get('host') || 'localhost'
  let port = url.port || '5432'
  if (list.hosts.length > 1) {
    host = list.hosts.join(',')
    port = ''
  }
  const database = decodeURIComponent(url.pathname.slice(1)) || decodeURIComponent(url.username) || 'postgres'
  const where = port ? `${host}:${port}` : `${host} (target_session_attrs=${list.targetSessionAttrs})`
  return { host, port, database, user: decodeURIComponent(url.username), where }
}

/**
 * Where the store is, for the start-up log: the SQLite file's absolute path, or PostgreSQL's host,
 * port, database and user (never the password), and the read pool's hosts when there is one, so an
 * operator sees which store a process uses.
 */
export function storeLocation(
  config: Pick<Config, 'databaseUrl' | 'dbPath'> & Partial<Pick<Config, 'databaseReadUrl'>>,
): {
  fields: Record<string, string>
  message: string
} {
  if (!config.databaseUrl) {
    return {
      fields: { store: 'sqlite', path: config.dbPath },
      message: `store: SQLite file ${config.dbPath}`,
    }
  }
  const { where, ...place } = postgresPlace(config.databaseUrl, 'DATABASE_URL')
  const fields: Record<string, string> = { store: 'postgres', ...place }
  let message = `store: PostgreSQL database "${place.database}" on ${where}`
  if (config.databaseReadUrl) {
    fields.readFrom = postgresPlace(config.databaseReadUrl, 'DATABASE_READ_URL').where
    message += `; plant reads from ${fields.readFrom} once caught up`
  }
  return { fields, message }
}
