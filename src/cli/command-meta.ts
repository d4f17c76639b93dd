import type { Command, Option } from 'commander'

/** What a completion offers for a command's argument, beyond the command words and flags. */
export type Completes = 'file' | 'token' | 'subscription' | 'delivery' | 'shell' | 'command'

const ENV = new WeakMap<Command, string[]>()
const REQUIRED = new WeakSet<Option>()
const COMPLETES = new WeakMap<Command, Completes>()

/** The environment variables a command reads, for its `--help` (see env-help.ts). */
export const envOf = (command: Command): string[] => ENV.get(command) ?? []

/** What the shell completes a command's argument to. */
export const completesOf = (command: Command): Completes | undefined => COMPLETES.get(command)

/** A subcommand of `parent`, with the environment it reads and what its argument completes to. */
export function subcommand(parent: Command, name: string, env: string[], completes?: Completes): Command {
  // `help` is a command of its own (program.ts), not commander's implicit one in each group.
  const sub = parent.command(name).helpCommand(false)
  ENV.set(sub, env)
  if (completes) COMPLETES.set(sub, completes)
  return sub
}

/**
 * An option the command cannot do without, checked by the command itself rather than by
 * commander's `requiredOption`, whose check comes before the unknown-option check and would
 * answer `--nmae x` with "--name is required" instead of suggesting `--name`.
 */
export function requiredOption(command: Command, flags: string, description: string): Command {
  command.option(flags, description)
  REQUIRED.add(command.options.at(-1) as Option)
  return command
}

/** Whether the usage shows `option` without brackets. */
export const isRequired = (option: Option): boolean => REQUIRED.has(option)
