import type pg from 'pg'

/**
 * Runs `work` on one pooled connection between BEGIN and COMMIT (ROLLBACK on an error). While a
 * client is checked out, pg's pool does not listen for its 'error' event, and an unlistened one
 * (the connection dropped between two statements) ends the process (brianc/node-postgres#1324):
 * it is listened for here. A client that saw any error is discarded, never pooled again.
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect()
  let failure: Error | undefined
  const onError = (error: Error) => {
    failure ??= error
  }
  client.on('error', onError)
  try {
    await client.query('BEGIN')
    const result = await work(client)
    await client.query('COMMIT')
    return result
  } catch (error) {
    failure ??= error instanceof Error ? error : new Error(String(error))
    await client.query('ROLLBACK').catch(() => {})
    throw error
  } finally {
    client.removeListener('error', onError)
    client.release(failure)
  }
}
