import { ENV_VARIABLES, type EnvName } from '../config/env-schema.js'
import { defaultText } from '../config/env-docs.js'

/** Markdown to the plain text a terminal shows: no backticks, a link's text without its target. */
const plain = (markdown: string) => markdown.replace(/\[([^[\]]*)\]\([^()]*\)/g, '$1').replaceAll('`', '')

/** What `--help` says of each environment variable a command reads: its default and meaning. */
export const ENV_HELP: Record<string, [fallback: string, meaning: string]> = Object.fromEntries(
  ENV_VARIABLES.map(([name, variable]) => [name, [plain(defaultText(variable)), variable.title]]),
)

/** The variables that choose and tune the store: every command that opens one reads them. */
export const STORE_ENV: EnvName[] = [
  'PLANT_STORE_DB',
  'DATABASE_URL',
  'DB_POOL_SIZE',
  'DB_STATEMENT_TIMEOUT_MS',
  'SQLITE_SYNC',
  'SQLITE_MAX_BATCH',
  'SQLITE_BUSY_TIMEOUT_MS',
]

/** Everything `serve` reads. */
export const SERVE_ENV = Object.keys(ENV_HELP)
