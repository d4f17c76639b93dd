#!/usr/bin/env node
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { ConfigError, loadConfig } from '../config.js'
import { openStorage } from '../storage/open.js'
import { nativeAddonMismatch } from '../storage/sqlite/native-addon.js'
import type { Storage } from '../storage/storage.js'
import { backupCommand } from './backup.js'
import { completionCommand } from './completion.js'
import { exportCommand } from './export.js'
import { commandsFor, describe, usage } from './help.js'
import { importCommand } from './import.js'
import { announceNewStore, type OpenStore, storeIsMissing } from './open-store.js'
import { CommandError, print, printError, stdoutFailed, UsageError, watchStdout } from './output.js'
import { Progress } from './progress.js'
import { serveCommand } from './serve.js'
import { tokensCommand } from './tokens.js'
import { webhooksCommand } from './webhooks.js'

/** The package's version, from the package.json above this file (in dist/bundle or dist/src/cli). */
function version(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as Record<string, string>
      if (pkg.name === 'plant-store' && pkg.version) return pkg.version
    } catch {
      // Not here; look in the folder above.
    }
    if (path.dirname(dir) === dir) throw new CommandError('cannot find the package.json of plant-store')
  }
}

/** `--help` anywhere, `-h`, or `help [COMMAND]`: the help asked for goes to stdout, exit 0. */
function help(words: string[]): void {
  if (words.length === 0) return print(usage())
  const commands = commandsFor(words)
  if (commands.length === 0) throw new UsageError(`no command "${words.join(' ')}" to describe`)
  print(describe(commands))
}

async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv
  if (command === '--version' || command === '-V') return print(version())
  if (command === 'help') return help(args)
  if (argv.includes('--help') || argv.includes('-h')) return help(argv.filter((a) => !a.startsWith('-')))
  if (!command) throw new UsageError('a command is required')
  if (command === 'serve') return serveCommand(args)
  if (command === 'completion') return completionCommand(args)
  if (command === 'backup') return backupCommand(args)
  if (!['migrate', 'tokens', 'webhooks', 'export', 'import'].includes(command))
    throw new UsageError(`unknown command "${command}"`)
  let storage: Storage | undefined
  const open: OpenStore = async ({ create = false, tune = {}, onMigration } = {}) => {
    if (storage) return storage
    const config = { ...loadConfig(), ...tune }
    const missing = storeIsMissing(config)
    if (missing && !create)
      throw new CommandError(`no store at ${config.dbPath} (PLANT_STORE_DB); check the path`)
    storage = await openStorage(config, { onMigration })
    if (missing) announceNewStore(config)
    return storage
  }
  try {
    if (command === 'migrate') await migrate(open, args)
    else if (command === 'webhooks') await webhooksCommand(open, args)
    else if (command === 'export') await exportCommand(open, args)
    else if (command === 'import') await importCommand(open, args)
    else await tokensCommand(open, args)
  } finally {
    await storage?.close()
  }
}

/** Opening the store applies any pending migration; on a big store that takes a while, so say so. */
async function migrate(open: OpenStore, args: string[]): Promise<void> {
  if (args.length > 0) throw new UsageError('migrate takes no arguments')
  const progress = new Progress('migrate')
  progress.update('opening the store and applying pending migrations...', true)
  const storage = await open({
    create: true,
    onMigration: (version, name) => progress.update(`applying migration ${version} (${name})...`, true),
  })
  progress.done('done')
  print(`migrations applied: ${storage.kind} store is up to date`)
}

/** After a usage error: the usage of the command it was about, or of them all. */
function usageFor(argv: string[]): string {
  const commands = commandsFor(argv.filter((a) => !a.startsWith('-')))
  if (commands.length === 0) return usage()
  const lines = commands.map((c) => `  plant-store ${c.name}${c.args ? ` ${c.args}` : ''}`)
  return ['Usage:', ...lines, '', `More: plant-store ${argv[0]} --help`].join('\n')
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
      printError(`plant-store: ${error.message}\n\n${usageFor(argv)}`)
      process.exit(2)
    }
    if (error instanceof ConfigError || error instanceof CommandError) {
      printError(`plant-store: ${error.message}`)
      process.exit(1)
    }
    // Commands that open SQLite themselves (backup) meet a mismatched addon here.
    const mismatch = nativeAddonMismatch(error)
    if (mismatch) {
      printError(`plant-store: ${mismatch}`)
      process.exit(1)
    }
    printError(`plant-store: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
    process.exit(1)
  })
