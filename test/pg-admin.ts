import pg from 'pg'
import { int8AsBigInt } from '../src/storage/postgres/connection.js'

export type Row = Record<string, unknown>

/** Runs `strings` with each interpolated value as a bound parameter ($1, $2, ...); resolves to the rows. */
export type Sql = (strings: TemplateStringsArray, ...values: unknown[]) => Promise<Row[]>

/** A test's own connection(s) to PostgreSQL, beside the store under test: int8 read as bigint. */
export interface Admin extends Sql {
  /** Runs text with no parameters, several statements allowed. */
  unsafe(text: string): Promise<Row[]>
  /** One connection of its own, for a transaction held open across statements. */
  reserve(): Promise<Sql & { release(): void }>
  end(): Promise<void>
}

function template(run: (text: string, values: unknown[]) => Promise<pg.QueryResult>): Sql {
  return async (strings, ...values) => {
    const text = strings.reduce((sql, part, i) => `${sql}$${i}${part}`)
    return (await run(text, values)).rows as Row[]
  }
}

export function pgAdmin(url: string, max = 1): Admin {
  const pool = new pg.Pool({ connectionString: url, max, types: int8AsBigInt })
  pool.on('error', () => {})
  const admin = template((text, values) => pool.query(text, values)) as Admin
  admin.unsafe = async (text) => {
    const result = (await pool.query(text)) as pg.QueryResult | pg.QueryResult[]
    return (Array.isArray(result) ? (result.at(-1)?.rows ?? []) : result.rows) as Row[]
  }
  admin.reserve = async () => {
    const client = await pool.connect()
    client.on('error', () => {})
    const sql = template((text, values) => client.query(text, values)) as Sql & { release(): void }
    sql.release = () => client.release()
    return sql
  }
  admin.end = () => pool.end()
  return admin
}
