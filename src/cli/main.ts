#!/usr/bin/env node
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { CommanderError } from 'commander'
import { ConfigError, loadConfig } from '../config.js'
import { openStorage } from '../storage/open.js'
import { nativeAddonMismatch } from '../storage/sqlite/native-addon.js'
import type { Storage } from '../storage/storage.js'
import { paint, useColour } from '../colour.js'
import { findCommand, pathOf, usage, usageArgs } from './help-text.js'
import type { Run } from './migrate.js'
import { announceNewStore, type OpenStore, storeIsMissing } from './open-store.js'
import { CommandError, escapeControls, stdoutFailed, UsageError, watchStdout } from './output.js'
import { buildProgram } from './program.js'

/** The package's version, from the package.json above this file (in dist/bundle or dist/src/cli). */
function version(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as Record<string, string>
      if (pkg.name === 'plant-store' && pkg.version) return pkg.version
    } catch {
      // Not here; look in the folder above.
    }
    if (path.dirname(dir) === dir) return 'unknown'
  }
}

/** Opens the store at most once for the command, when it asks, and closes it after. */
const run: Run = async (body) => {
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
    await body(open)
  } finally {
    await storage?.close()
  }
}

/**
 * Every error in one style: `plant-store: <what>: <why>` on one line of stderr (docs/cli.md), red
 * on a terminal; a wrong command line adds the usage of the command it was about.
 */
function fail(message: string, code: 1 | 2, usageText?: string): never {
  const prefix = paint(useColour(process.stderr), 'red', 'plant-store:')
  process.stderr.write(`${prefix} ${escapeControls(message)}\n${usageText ? `\n${usageText}\n` : ''}`)
  process.exit(code)
}

/** commander's message in the CLI's style: `unknown command "tokns" (did you mean "tokens"?)`. */
function commanderMessage(error: CommanderError, words: string[]): string {
  if (error.code === 'commander.help') {
    const group = findCommand(program, words)
    return group && group !== program
      ? `${pathOf(group)} needs a command: ${group.commands.map((c) => c.name()).join(', ')}`
      : 'a command is required'
  }
  const message = error.message
    .replace(/^error: /, '')
    .replace(/'([^']*)'/g, '"$1"')
    .replace(/<([\w|]+)>/g, '$1')
    .replace(/\.$/, '')
  const choices = /value "(.*)" is invalid for argument "(.*)"\. Allowed choices are (.*)$/.exec(message)
  if (choices) return `${choices[2]} must be one of ${choices[3]}, got "${choices[1]}"`
  const required = /^required option "(.*)" not specified$/.exec(message)
  if (required) return `${required[1]} is required`
  return message.replace(/\n\(Did you mean (?:one of )?([^?]+)\?\)$/, (_, names: string) => {
    const quoted = names.split(', ').map((name) => `"${name}"`)
    return ` (did you mean ${quoted.join(' or ')}?)`
  })
}

/** The usage of the command a wrong command line was about, or of them all. */
function usageFor(words: string[]): string {
  let command = program
  for (const word of words) command = command.commands.find((c) => c.name() === word) ?? command
  if (command === program) return usage(program)
  const lines = (command.commands.length > 0 ? command.commands : [command]).map((c) =>
    `  plant-store ${pathOf(c)} ${usageArgs(c)}`.trimEnd(),
  )
  return ['Usage:', ...lines, '', `More: plant-store ${pathOf(command)} --help`].join('\n')
}

watchStdout()
const argv = process.argv.slice(2)
const words = argv.filter((word) => !word.startsWith('-'))
const program = buildProgram(run, version())
program
  .parseAsync(argv, { from: 'user' })
  .then(async () => {
    // A running service's log lines go through its log destination, which counts what is lost.
    if (argv[0] === 'serve') return
    const failure = await stdoutFailed()
    if (failure)
      throw new CommandError(`could not write to standard output: ${failure.code ?? failure.message}`)
  })
  .catch(async (error: unknown) => {
    if (error instanceof CommanderError) {
      // Help and --version: written to stdout already.
      if (error.exitCode === 0) {
        await stdoutFailed()
        process.exit(0)
      }
      fail(commanderMessage(error, words), 2, usageFor(words))
    }
    if (error instanceof UsageError) fail(error.message, 2, usageFor(words))
    if (error instanceof ConfigError || error instanceof CommandError) fail(error.message, 1)
    // Commands that open SQLite themselves (backup) meet a mismatched addon here.
    const mismatch = nativeAddonMismatch(error)
    if (mismatch) fail(mismatch, 1)
    fail(error instanceof Error ? (error.stack ?? error.message) : String(error), 1)
  })
