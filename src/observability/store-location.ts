import type { Config } from '../config.js'

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
  const url = new URL(config.databaseUrl)
  // A host may also come from the query (?host=/run/postgresql for a socket), as libpq allows.
  const host = url.hostname || url.searchParams.get('host') || 'localhost'
  const port = url.port || '5432'
  const database = decodeURIComponent(url.pathname.slice(1)) || decodeURIComponent(url.username) || 'postgres'
  const fields = { store: 'postgres', host, port, database, user: decodeURIComponent(url.username) }
  return { fields, message: `store: PostgreSQL database "${database}" on ${host}:${port}` }
}
