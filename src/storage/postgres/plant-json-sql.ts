/**
 * The plant in the row `alias` as the API's JSON text (see plant-json.ts), built by PostgreSQL:
 * to_json escapes a string as JSON.stringify does, and an int8 prints exactly. Reads return it (one
 * text column per plant or page is far less to parse than three typed columns), and creates store
 * it as the webhook payload.
 */
export const plantJsonSql = (
  alias: string,
) => `'{"id":' || ${alias}.id || ',"name":' || to_json(${alias}.name) ||
  CASE WHEN ${alias}.tag IS NULL THEN '' ELSE ',"tag":' || to_json(${alias}.tag) END || '}'`
