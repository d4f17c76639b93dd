/**
 * The plant in the row `alias` as the API's JSON text (see plant-json.ts), built by PostgreSQL:
 * to_json escapes a string as JSON.stringify does, and an int8 prints exactly. One text column per
 * plant, or one per page, is far less for this process to parse than rows of three typed columns.
 */
export const plantJsonSql = (
  alias: string,
) => `'{"id":' || ${alias}.id || ',"name":' || to_json(${alias}.name) ||
  CASE WHEN ${alias}.tag IS NULL THEN '' ELSE ',"tag":' || to_json(${alias}.tag) END || '}'`
