import { ENV_HELP, SERVE_ENV, STORE_ENV } from './env-help.js'

/** One command as `--help` and the shell completions describe it. */
export interface CommandSpec {
  /** The words after `plant-store`: `serve`, `tokens create`. */
  name: string
  /** Its arguments, after the name: `--name NAME [--scopes LIST]`. */
  args: string
  summary: string
  /** `[flag, meaning]`; the flag as typed, with its value's placeholder. */
  options: [string, string][]
  /** Environment variables it reads (see env-help.ts). */
  env: string[]
}

const json: [string, string] = ['--json', 'print JSON instead of a table, for scripts']

/** Every command, in the order the usage lists them; the completions are built from it too. */
export const COMMANDS: CommandSpec[] = [
  {
    name: 'serve',
    args: '[--workers N|auto]',
    summary: 'Serve the HTTP API on HOST:PORT until SIGTERM or SIGINT; creates the store if missing.',
    options: [['--workers N|auto', 'worker processes (node:cluster); auto: one per usable core; default 1']],
    env: SERVE_ENV,
  },
  {
    name: 'migrate',
    args: '',
    summary: 'Create the store if missing and apply pending schema migrations, then exit.',
    options: [],
    env: STORE_ENV,
  },
  {
    name: 'tokens create',
    args: '--name NAME [--scopes LIST] [--expires-in DURATION]',
    summary: 'Create an API token and print its secret (shown once) alone on stdout.',
    options: [
      ['--name NAME', 'who or what the token is for (required, at most 100 characters)'],
      [
        '--scopes LIST',
        'comma-separated: plants:read,plants:write,metrics:read (default: plants:read,plants:write)',
      ],
      ['--expires-in DURATION', 'lifetime such as 30d, 12h, 15m, 45s or 2w (default: never)'],
    ],
    env: STORE_ENV,
  },
  {
    name: 'tokens list',
    args: '[--json]',
    summary: 'List tokens (never their secrets).',
    options: [json],
    env: STORE_ENV,
  },
  { name: 'tokens revoke', args: 'ID', summary: 'Revoke a token at once.', options: [], env: STORE_ENV },
  {
    name: 'webhooks add',
    args: 'URL',
    summary: 'Subscribe URL to an event per created plant; prints the signing secret (shown once).',
    options: [],
    env: [...STORE_ENV, 'WEBHOOK_ALLOW_PRIVATE'],
  },
  {
    name: 'webhooks list',
    args: '[--json]',
    summary: 'List subscriptions (never their secrets).',
    options: [json],
    env: STORE_ENV,
  },
  {
    name: 'webhooks remove',
    args: 'ID',
    summary: 'Remove a subscription; its pending deliveries are failed.',
    options: [],
    env: STORE_ENV,
  },
  {
    name: 'webhooks deliveries',
    args: '[--failed] [--limit N] [--attempts N] [--json]',
    summary: 'List deliveries, newest first, with their recent attempts.',
    options: [
      ['--failed', 'only deliveries that failed for good'],
      ['--limit N', 'deliveries shown, 1 to 1000 (default 50)'],
      ['--attempts N', 'attempts shown per delivery, 0 to 1000 (default 5)'],
      json,
    ],
    env: STORE_ENV,
  },
  {
    name: 'webhooks retry',
    args: 'ID...|--failed',
    summary:
      'Put failed deliveries back in the outbox, due now: a running `serve` sends each again as its next attempt, under the same webhook-id.',
    options: [['--failed', 'every failed delivery whose subscription still exists']],
    env: STORE_ENV,
  },
  {
    name: 'webhooks test',
    args: 'SUBSCRIPTION_ID',
    summary:
      "Send a signed sample event to a subscription now, as the worker sends, and print the receiver's status and body.",
    options: [],
    env: [...STORE_ENV, 'WEBHOOK_TIMEOUT_MS', 'WEBHOOK_ALLOW_PRIVATE'],
  },
  {
    name: 'backup',
    args: 'FILE',
    summary:
      "Copy the SQLite store to FILE with SQLite's online backup API, consistent while the service writes. PostgreSQL: use pg_dump.",
    options: [],
    env: ['PLANT_STORE_DB', 'DATABASE_URL'],
  },
  {
    name: 'export',
    args: '[FILE|-]',
    summary:
      'Write every plant as NDJSON, {"id":...,"name":...,"tag":...} per line, ids exact (default: stdout).',
    options: [['--force', 'overwrite FILE if it exists']],
    env: STORE_ENV,
  },
  {
    name: 'import',
    args: 'FILE|-',
    summary:
      'Create the plants of an NDJSON file by the rules of POST /plants: the same plant again is already present, another plant at its id a conflict, a bad line reported and skipped.',
    options: [],
    env: [...STORE_ENV, 'BODY_LIMIT'],
  },
  {
    name: 'completion',
    args: 'bash|zsh',
    summary: 'Print a shell completion script: source <(plant-store completion bash).',
    options: [],
    env: [],
  },
  {
    name: 'help',
    args: '[COMMAND]',
    summary: 'Describe every command, or one with its options and environment.',
    options: [],
    env: [],
  },
]

/** The one-screen usage: a line per command. */
export function usage(): string {
  const lines = COMMANDS.map((c) => `  plant-store ${c.name}${c.args ? ` ${c.args}` : ''}`)
  return [
    'Usage:',
    ...lines,
    '  plant-store --version',
    '',
    'plant-store COMMAND --help (or plant-store help COMMAND) describes a command, its options and',
    'the environment variables it reads. Configuration comes from the environment; see docs/cli.md.',
  ].join('\n')
}

/** The commands `words` asks about: one (`tokens create`), or a group (`tokens`); none if unknown. */
export function commandsFor(words: string[]): CommandSpec[] {
  const [first, second] = words
  const exact = COMMANDS.find(
    (c) => c.name === `${first} ${second}` || (c.name === first && !c.name.includes(' ')),
  )
  if (exact) return [exact]
  return COMMANDS.filter((c) => c.name.startsWith(`${first} `))
}

/** What `plant-store COMMAND --help` prints; a group's environment is listed once, at the end. */
export function describe(commands: CommandSpec[]): string {
  const env = [...new Set(commands.flatMap((c) => c.env))]
  const parts = commands.map(describeOne)
  if (env.length > 0) {
    const rows = env.map((name): [string, string] => {
      const [fallback, meaning] = ENV_HELP[name] ?? ['', '']
      return [name, `${meaning} (default: ${fallback})`]
    })
    parts.push(['Environment:', ...columns(rows)].join('\n'))
  }
  return parts.join('\n\n')
}

function describeOne(command: CommandSpec): string {
  const parts = [
    `Usage: plant-store ${command.name}${command.args ? ` ${command.args}` : ''}`,
    '',
    command.summary,
  ]
  if (command.options.length > 0) parts.push('', 'Options:', ...columns(command.options))
  return parts.join('\n')
}

function columns(rows: [string, string][]): string[] {
  const width = Math.max(...rows.map(([left]) => left.length))
  return rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`)
}
