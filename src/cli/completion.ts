import type { Command } from 'commander'
import { completesOf } from './command-meta.js'
import { pathOf } from './help-text.js'
import type { OpenStore } from './open-store.js'
import { print } from './output.js'

export const SHELLS = ['bash', 'zsh', 'fish']

/** One command path of the tree (`tokens`, `tokens create`) and what may follow it. */
interface Entry {
  path: string
  /** Its subcommands, or its flags and `--help`. */
  words: string[]
  /** What its argument completes to; for `help`, the command names. */
  completes: string | undefined
  summary: string
}

/** The tree, walked: the only source the scripts are made from. */
function entries(program: Command): Entry[] {
  const visible = (command: Command) => command.createHelp().visibleCommands(command)
  const walk = (command: Command): Entry[] => [
    {
      path: pathOf(command),
      words:
        visible(command).length > 0
          ? visible(command).map((c) => c.name())
          : [...command.options.map((o) => o.long ?? o.flags), '--help'],
      completes: completesOf(command),
      summary: command.summary(),
    },
    ...visible(command).flatMap(walk),
  ]
  return visible(program).flatMap(walk)
}

const topWords = (program: Command) => [
  ...program
    .createHelp()
    .visibleCommands(program)
    .map((c) => c.name()),
  '--help',
  '--version',
]

/** The shell word list for what an argument completes to (ids come from the store, at Tab). */
const idKinds = ['token', 'subscription', 'delivery']

/**
 * Bash: the command path is the words typed so far that name commands; then its subcommands or
 * flags, and its argument: file names (one per line, so a name with spaces stays whole, quoted by
 * `compopt -o filenames`), ids read from the store by the CLI itself, or shell names.
 */
function bash(program: Command): string {
  const list = entries(program)
  const arms = list
    .map((e) => `    "${e.path}") words="${e.words.join(' ')}"; kind="${e.completes ?? ''}" ;;`)
    .join('\n')
  return `# plant-store completion for bash: source <(plant-store completion bash)
_plant_store() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" key="" word words="${topWords(program).join(' ')}" kind="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    [[ $word == -* ]] && continue
    case "\${key:+$key }$word" in
      ${list.map((e) => `"${e.path}"`).join('|')}) key="\${key:+$key }$word" ;;
    esac
  done
  case "$key" in
    "") ;;
${arms}
  esac
  # A word typed with a backslash before a space or an opening quote, as the shell will read it.
  cur="\${cur//\\\\ / }"; cur="\${cur#[\\"\\']}"
  local IFS=$'\\n'
  COMPREPLY=()
  # Where an argument is expected, its flags only once a dash is typed.
  if [[ -z $kind || $cur == -* ]]; then COMPREPLY=($(compgen -W "\${words// /$'\\n'}" -- "$cur")); fi
  [[ $cur == -* ]] && return
  case "$kind" in
    file) compopt -o filenames 2>/dev/null; COMPREPLY+=($(compgen -f -- "$cur")) ;;
    ${idKinds.join('|')}) COMPREPLY+=($(compgen -W "$("\${COMP_WORDS[0]}" completion-ids "$kind" 2>/dev/null)" -- "$cur")) ;;
    shell) COMPREPLY+=($(compgen -W $'${SHELLS.join('\\n')}' -- "$cur")) ;;
    command) COMPREPLY+=($(compgen -W $'${topWords(program)
      .filter((w) => !w.startsWith('-'))
      .join('\\n')}' -- "$cur")) ;;
  esac
}
complete -F _plant_store plant-store
`
}

/** Zsh: the same walk through $words, compadd for words and ids, _files for files. */
function zsh(program: Command): string {
  const list = entries(program)
  const arms = list
    .map((e) => `    "${e.path}") choices=(${e.words.join(' ')}); kind="${e.completes ?? ''}" ;;`)
    .join('\n')
  return `#compdef plant-store
# plant-store completion for zsh: source <(plant-store completion zsh)
_plant_store() {
  local key="" word kind="" i
  local -a choices
  choices=(${topWords(program).join(' ')})
  for ((i = 2; i < CURRENT; i++)); do
    word="\${words[i]}"
    [[ $word == -* ]] && continue
    case "\${key:+$key }$word" in
      ${list.map((e) => `"${e.path}"`).join('|')}) key="\${key:+$key }$word" ;;
    esac
  done
  case "$key" in
    "") ;;
${arms}
  esac
  if [[ -z $kind || "\${words[CURRENT]}" == -* ]]; then compadd -- $choices; fi
  [[ "\${words[CURRENT]}" == -* ]] && return
  case "$kind" in
    file) _files ;;
    ${idKinds.join('|')}) compadd -- \${(f)"$("\${words[1]}" completion-ids "$kind" 2>/dev/null)"} ;;
    shell) compadd -- ${SHELLS.join(' ')} ;;
    command) compadd -- ${topWords(program)
      .filter((w) => !w.startsWith('-'))
      .join(' ')} ;;
  esac
}
if (( $+functions[compdef] )); then compdef _plant_store plant-store; fi
`
}

/** Fish quotes: single quotes, with \\ and \' escaped. */
const fishQuote = (text: string) => `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`

/** Fish: one `complete` line per word, with the summary as its description. */
function fish(program: Command): string {
  const lines = [
    '# plant-store completion for fish: plant-store completion fish | source',
    'complete -c plant-store -f',
  ]
  const top = program.createHelp().visibleCommands(program)
  lines.push(
    `complete -c plant-store -n __fish_use_subcommand -l version -s V -d ${fishQuote('print the version')}`,
  )
  for (const command of top) {
    lines.push(
      `complete -c plant-store -n __fish_use_subcommand -a ${command.name()} -d ${fishQuote(command.summary())}`,
    )
  }
  for (const entry of entries(program)) {
    const names = entry.path.split(' ')
    const seen = names.map((name) => `__fish_seen_subcommand_from ${name}`).join('; and ')
    const command = names.reduce<Command | undefined>(
      (at, name) => at?.commands.find((c) => c.name() === name),
      program,
    )
    if (!command) continue
    const subs = command.createHelp().visibleCommands(command)
    if (subs.length > 0) {
      const none = `not __fish_seen_subcommand_from ${subs.map((c) => c.name()).join(' ')}`
      for (const sub of subs)
        lines.push(
          `complete -c plant-store -n ${fishQuote(`${seen}; and ${none}`)} -a ${sub.name()} -d ${fishQuote(sub.summary())}`,
        )
      continue
    }
    for (const option of command.options) {
      const takes = option.required ? ' -r' : ''
      lines.push(
        `complete -c plant-store -n ${fishQuote(seen)} -l ${option.long?.replace(/^--/, '')}${takes} -d ${fishQuote(option.description)}`,
      )
    }
    const kind = entry.completes
    if (kind === 'file') lines.push(`complete -c plant-store -n ${fishQuote(seen)} -F`)
    else if (kind && idKinds.includes(kind))
      lines.push(
        `complete -c plant-store -n ${fishQuote(seen)} -a ${fishQuote(`(plant-store completion-ids ${kind} 2>/dev/null)`)}`,
      )
    else if (kind === 'shell')
      lines.push(`complete -c plant-store -n ${fishQuote(seen)} -a ${fishQuote(SHELLS.join(' '))}`)
    else if (kind === 'command')
      lines.push(
        `complete -c plant-store -n ${fishQuote(seen)} -a ${fishQuote(top.map((c) => c.name()).join(' '))}`,
      )
  }
  return `${lines.join('\n')}\n`
}

/** `plant-store completion bash|zsh|fish`; commander has checked the shell's name. */
export function completionCommand(program: Command, shell: string): void {
  const make = shell === 'bash' ? bash : shell === 'zsh' ? zsh : fish
  process.stdout.write(make(program))
}

/**
 * `plant-store completion-ids KIND`: what the scripts offer after `tokens revoke`, `webhooks
 * remove|test` and `webhooks retry`, one per line. It opens the store as every command does, and
 * never creates one; on any trouble it prints nothing and the shell offers nothing.
 */
export async function storeIds(open: OpenStore, kind: string): Promise<void> {
  const storage = await open()
  let ids: string[] = []
  if (kind === 'token') ids = (await storage.listTokens()).filter((t) => !t.revokedAt).map((t) => t.id)
  else if (kind === 'subscription') ids = (await storage.listSubscriptions()).map((s) => s.id)
  else if (kind === 'delivery')
    ids = (await storage.listDeliveries({ failedOnly: true, limit: 1000 })).map((d) => d.id)
  for (const id of ids) print(id)
}
