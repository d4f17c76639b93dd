import type { Command, Help } from 'commander'
import { ENV_HELP } from './env-help.js'
import { UsageError } from './output.js'
import { envOf, isRequired } from './command-meta.js'

/** `tokens create`: the words after `plant-store`. */
export function pathOf(command: Command): string {
  const names: string[] = []
  for (let at: Command | null = command; at?.parent; at = at.parent) names.unshift(at.name())
  return names.join(' ')
}

/** The commands that run something, groups opened up: `tokens create`, not `tokens`. */
export function leaves(command: Command): Command[] {
  const visible = command.createHelp().visibleCommands(command)
  return visible.length === 0 ? [command] : visible.flatMap(leaves)
}

/** What follows the name on a usage line: required options, optional ones, then arguments. */
export function usageArgs(command: Command): string {
  const options = command.options.map((o) => {
    const term = o.flags.replace(/^-\w, /, '').replace(/[<>]/g, '')
    return isRequired(o) ? term : `[${term}]`
  })
  const args = command.registeredArguments.map((a) => {
    const name = `${a.name()}${a.variadic ? '...' : ''}`
    return a.required ? name : `[${name}]`
  })
  return [...options.sort((a, b) => Number(a.startsWith('[')) - Number(b.startsWith('['))), ...args].join(' ')
}

const usageLine = (command: Command) => `plant-store ${pathOf(command)} ${usageArgs(command)}`.trimEnd()

/** The one-screen usage: a line per command. */
export function usage(program: Command): string {
  return [
    'Usage:',
    ...leaves(program).map((c) => `  ${usageLine(c)}`),
    '  plant-store --version',
    '',
    'plant-store COMMAND --help (or plant-store help COMMAND) describes a command, its options and',
    'the environment variables it reads. Configuration comes from the environment; see docs/cli.md.',
  ].join('\n')
}

function columns(rows: [string, string][]): string[] {
  const width = Math.max(...rows.map(([left]) => left.length))
  return rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`)
}

function describeOne(command: Command): string {
  const parts = [`Usage: ${usageLine(command)}`, '', command.summary()]
  const options = command.options.map((o): [string, string] => [o.flags.replace(/[<>]/g, ''), o.description])
  if (options.length > 0) parts.push('', 'Options:', ...columns(options))
  return parts.join('\n')
}

/** A command's help; a group's environment is listed once, at the end. */
function describe(commands: Command[]): string {
  const env = [...new Set(commands.flatMap(envOf))]
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

/** commander's `formatHelp`: what `--help` prints for the root, a group or a command. */
export function formatHelp(command: Command, _helper: Help): string {
  return `${command.parent ? describe(leaves(command)) : usage(command)}\n`
}

/** The command `words` names (`tokens`, `tokens create`), or undefined. */
export function findCommand(program: Command, words: string[]): Command | undefined {
  let at: Command | undefined = program
  for (const word of words) at = at?.commands.find((c) => c.name() === word)
  return at
}

/** `plant-store help [COMMAND...]`. */
export function describeCommands(program: Command, words: string[]): string {
  if (words.length === 0) return usage(program)
  const command = findCommand(program, words)
  if (!command) throw new UsageError(`no command "${words.join(' ')}" to describe`)
  return describe(leaves(command))
}
