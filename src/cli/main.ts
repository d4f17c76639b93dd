#!/usr/bin/env node
import { existsSync } from 'node:fs'
import { ConfigError, loadConfig } from '../config.js'
import { openStorage } from '../storage/open.js'
import type { Storage } from '../storage/storage.js'
import type { OpenStore } from './open-store.js'
import { CommandError, stdoutFailed, UsageError, watchStdout } from './output.js'
import { serveCommand } from './serve.js'
import { tokensCommand, tokensUsage } from './tokens.js'
import { webhooksCommand, webhooksUsage } from './webhooks.js'

const usage = `Usage:
plant-store serve [--workers N|auto]
plant-store migrate
${tokensUsage}
${webhooksUsage}

Configuration comes from the environment (PORT, HOST, PLANT_STORE_DB, DATABASE_URL, LOG_LEVEL, BODY_LIMIT, ...);
see docs/configuration.md.`

async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv
  // Asked for, the usage is the answer (exit 0); with no command at all, a command line is wrong (2).
  // A newcomer tries `tokens create --help` as often as `help`: anywhere, it asks for the usage.
  if (command === 'help' || argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${usage}\n`)
    return
  }
  if (!command) throw new UsageError('a command is required')
  const known = ['serve', 'migrate', 'tokens', 'webhooks']
  if (!known.includes(command)) throw new UsageError(`unknown command "${command}"`)
  if (command === 'serve') return serveCommand(args)
  let storage: Storage | undefined
  const open: OpenStore = async ({ create = false } = {}) => {
    if (storage) return storage
    const config = loadConfig()
    if (!config.databaseUrl && !create && !existsSync(config.dbPath))
      throw new CommandError(`no store at ${config.dbPath} (PLANT_STORE_DB); check the path`)
    storage = await openStorage(config)
    return storage
  }
  try {
    if (command === 'migrate') {
      if (args.length > 0) throw new UsageError('migrate takes no arguments')
      // Opening the store applies any pending migration; say where it stands.
      process.stdout.write(`migrations applied: ${(await open({ create: true })).kind} store is up to date\n`)
    } else if (command === 'webhooks') await webhooksCommand(open, args)
    else await tokensCommand(open, args)
  } finally {
    await storage?.close()
  }
}

watchStdout()
const argv = process.argv.slice(2)
main(argv)
  .then(async () => {
    // A running service's log lines go through its log destination, which counts what is lost.
    if (argv[0] === 'serve') return
    const failure = await stdoutFailed()
    if (failure)
      throw new CommandError(`could not write to standard output: ${failure.code ?? failure.message}`)
  })
  .catch((error: unknown) => {
    if (
      error instanceof UsageError ||
      (error instanceof Error && error.name === 'TypeError' && 'code' in error)
    ) {
      process.stderr.write(`plant-store: ${error.message}\n\n${usage}\n`)
      process.exit(2)
    }
    if (error instanceof ConfigError || error instanceof CommandError) {
      process.stderr.write(`plant-store: ${error.message}\n`)
      process.exit(1)
    }
    process.stderr.write(
      `plant-store: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    )
    process.exit(1)
  })
