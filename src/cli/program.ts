import { Argument, Command, type Option } from 'commander'
import { SCOPES, DEFAULT_SCOPES } from '../auth/token-format.js'
import { loadConfig } from '../config.js'
import { requiredOption, subcommand } from './command-meta.js'
import { backupCommand } from './backup.js'
import { parseWorkers } from './cluster.js'
import { completionCommand, SHELLS, storeIds } from './completion.js'
import { SERVE_ENV, STORE_ENV } from './env-help.js'
import { exportCommand } from './export.js'
import { describeCommands, formatHelp } from './help-text.js'
import { migrateCommand, type Run } from './migrate.js'
import { print } from './output.js'
import { restoreCommand } from './restore.js'
import { createToken, listTokens, revokeToken } from './tokens.js'
import { addSubscription, listDeliveries, listSubscriptions, removeSubscription } from './webhooks.js'

const json = ['--json', 'print JSON instead of a table, for scripts'] as const

/**
 * Every command and option of `plant-store`, declared once: parsing, `--help`, the suggestions
 * for a mistyped word and the shell completions are all read from this tree. `run` opens the
 * store for the commands that need one (main.ts) and closes it after.
 */
export function buildProgram(run: Run, packageVersion: string): Command {
  const program = new Command('plant-store')
    .configureHelp({ formatHelp })
    .helpCommand(false)
    .version(packageVersion, '-V, --version', 'print the version of plant-store')
  // Errors are printed by main.ts in the CLI's one style, with exit 2 for a wrong command line.
  program.exitOverride().configureOutput({ outputError: () => undefined, writeErr: () => undefined })

  subcommand(program, 'serve', SERVE_ENV)
    .summary('Serve the HTTP API on HOST:PORT until SIGTERM or SIGINT; creates the store if missing.')
    .option('--workers <N|auto>', 'worker processes (node:cluster); auto: one per usable core; default 1')
    .action(async (options: { workers?: string }) => {
      // The command line first (a wrong one is a 2 whatever the store), then the settings, both
      // before the server's modules load: Fastify and its plugins are most of the bundle, so a
      // wrong setting stops the start sooner, and the other commands start faster without them.
      const workers = parseWorkers(options.workers)
      const config = loadConfig()
      const { serveCommand } = await import('./serve.js')
      await serveCommand(workers, config)
    })
  subcommand(program, 'migrate', STORE_ENV)
    .summary('Create the store if missing and apply pending schema migrations, then exit.')
    .action(() => run(migrateCommand))

  const tokens = subcommand(program, 'tokens', STORE_ENV).summary('API tokens: create, list, revoke.')
  requiredOption(
    subcommand(tokens, 'create', STORE_ENV).summary(
      'Create an API token and print its secret (shown once) alone on stdout.',
    ),
    '--name <NAME>',
    'who or what the token is for (required, at most 100 characters)',
  )
    .option('--scopes <LIST>', `comma-separated: ${SCOPES.join(',')} (default: ${DEFAULT_SCOPES.join(',')})`)
    .option('--expires-in <DURATION>', 'lifetime such as 30d, 12h, 15m, 45s or 2w (default: never)')
    .action((options: { name?: string; scopes?: string; expiresIn?: string }) =>
      run((open) => createToken(open, options)),
    )
  subcommand(tokens, 'list', STORE_ENV)
    .summary('List tokens (never their secrets); relative times on a terminal, ISO otherwise.')
    .option(...json)
    .action((options: { json?: boolean }) => run((open) => listTokens(open, options)))
  subcommand(tokens, 'revoke', STORE_ENV, 'token')
    .summary('Revoke a token at once.')
    .argument('<ID>')
    .action((id: string) => run((open) => revokeToken(open, id)))

  const webhooks = subcommand(program, 'webhooks', STORE_ENV).summary(
    'Webhook subscriptions and their deliveries.',
  )
  subcommand(webhooks, 'add', [...STORE_ENV, 'WEBHOOK_ALLOW_PRIVATE'])
    .summary('Subscribe URL to an event per created plant; prints the signing secret (shown once).')
    .argument('<URL>')
    .action((url: string) => run((open) => addSubscription(open, url)))
  subcommand(webhooks, 'list', STORE_ENV)
    .summary('List subscriptions (never their secrets).')
    .option(...json)
    .action((options: { json?: boolean }) => run((open) => listSubscriptions(open, options)))
  subcommand(webhooks, 'remove', STORE_ENV, 'subscription')
    .summary('Remove a subscription; its pending deliveries are failed.')
    .argument('<ID>')
    .action((id: string) => run((open) => removeSubscription(open, id)))
  subcommand(webhooks, 'deliveries', STORE_ENV)
    .summary('List deliveries, newest first, with their recent attempts.')
    .option('--failed', 'only deliveries that failed for good')
    .option('--limit <N>', 'deliveries shown, 1 to 1000 (default 50)')
    .option('--attempts <N>', 'attempts shown per delivery, 0 to 1000 (default 5)')
    .option(...json)
    .action((options: { failed?: boolean; limit?: string; attempts?: string; json?: boolean }) =>
      run((open) => listDeliveries(open, options)),
    )
  subcommand(webhooks, 'retry', STORE_ENV, 'delivery')
    .summary(
      'Put failed deliveries back in the outbox, due now: a running `serve` sends each again as its next attempt, under the same webhook-id.',
    )
    .option('--failed', 'every failed delivery whose subscription still exists')
    .argument('[ID...]')
    .action((ids: string[], options: { failed?: boolean }) =>
      run(async (open) => (await import('./webhook-tools.js')).retry(open, ids, options)),
    )
  subcommand(webhooks, 'test', [...STORE_ENV, 'WEBHOOK_TIMEOUT_MS', 'WEBHOOK_ALLOW_PRIVATE'], 'subscription')
    .summary(
      "Send a signed sample event to a subscription now, as the worker sends, and print the receiver's status and body.",
    )
    .argument('<SUBSCRIPTION_ID>')
    .action((id: string) => run(async (open) => (await import('./webhook-tools.js')).sendTest(open, id)))

  subcommand(program, 'backup', ['PLANT_STORE_DB', 'DATABASE_URL'], 'file')
    .summary(
      "Copy the SQLite store to FILE with SQLite's online backup API, consistent while the service writes. PostgreSQL: use pg_dump.",
    )
    .argument('<FILE>')
    .action((file: string) => backupCommand(file))
  subcommand(program, 'restore', ['PLANT_STORE_DB', 'DATABASE_URL'], 'file')
    .summary(
      'Replace the SQLite store with the backup FILE, once checked, while no service holds the store; the replaced store is kept beside it. PostgreSQL: use pg_restore.',
    )
    .argument('<FILE>')
    .action((file: string) => restoreCommand(file))
  subcommand(program, 'export', STORE_ENV, 'file')
    .summary(
      'Write every plant as NDJSON, {"id":...,"name":...,"tag":...} per line, ids exact (default: stdout).',
    )
    .option('--force', 'overwrite FILE if it exists')
    .argument('[FILE|-]')
    .action((file: string | undefined, options: { force?: boolean }) =>
      run((open) => exportCommand(open, file, options)),
    )
  subcommand(program, 'import', [...STORE_ENV, 'BODY_LIMIT'], 'file')
    .summary(
      'Create the plants of an NDJSON file by the rules of POST /plants: the same plant again is already present, another plant at its id a conflict, a bad line reported and skipped.',
    )
    .argument('<FILE|->')
    // Imported when run, as webhook-tools.js is: they load the plant validator and the metrics,
    // which would cost every other command some 40 ms at start.
    .action((file: string) => run(async (open) => (await import('./import.js')).importCommand(open, file)))
  subcommand(program, 'completion', [], 'shell')
    .summary(`Print a shell completion script: source <(plant-store completion bash).`)
    .addArgument(new Argument('<SHELL>').choices(SHELLS))
    .action((shell: string) => completionCommand(program, shell))
  // Hidden: what the completion scripts call for the ids they offer.
  program
    .command('completion-ids', { hidden: true })
    .argument('<KIND>')
    .action((kind: string) => run((open) => storeIds(open, kind)))
  subcommand(program, 'help', [], 'command')
    .summary('Describe every command, or one with its options and environment.')
    .argument('[COMMAND...]')
    .action((words: string[]) => print(describeCommands(program, words)))
  return program
}

/** An option flag without its value: `--expires-in`. */
export const flagOf = (option: Option): string => option.long ?? option.short ?? option.flags
