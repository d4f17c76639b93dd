import { COMMANDS } from './help.js'
import { UsageError } from './output.js'

/** The completable words after a command: its subcommands, or its option flags. */
function table(): { top: string[]; next: Map<string, string[]> } {
  const top = [...new Set(COMMANDS.map((c) => c.name.split(' ')[0] as string)), '--help', '--version']
  const next = new Map<string, string[]>()
  for (const command of COMMANDS) {
    const flags = [...command.options.map(([flag]) => flag.split(' ')[0] as string), '--help']
    next.set(command.name, [...new Set(flags)])
    const [group, sub] = command.name.split(' ')
    if (sub && group) next.set(group, [...(next.get(group) ?? []), sub])
  }
  next.set('completion', ['bash', 'zsh'])
  next.set('help', [...top.filter((word) => !word.startsWith('-'))])
  return { top, next }
}

/** A case arm per command: `"tokens create") words="--name ...";;`. */
function cases(next: Map<string, string[]>, indent: string): string {
  return [...next].map(([name, words]) => `${indent}"${name}") words="${words.join(' ')}" ;;`).join('\n')
}

/**
 * Bash: completes the command, the subcommand, then that command's flags, and file names where a
 * command takes a FILE. Sourced with `source <(plant-store completion bash)`.
 */
function bash(): string {
  const { top, next } = table()
  return `# plant-store completion for bash: source <(plant-store completion bash)
_plant_store() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" words key
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${top.join(' ')}" -- "$cur"))
    return
  fi
  key="\${COMP_WORDS[1]}"
  if [ "$COMP_CWORD" -gt 2 ] && [[ "\${COMP_WORDS[2]}" != -* ]]; then key="$key \${COMP_WORDS[2]}"; fi
  case "$key" in
${cases(next, '    ')}
    *) words="" ;;
  esac
  case "\${COMP_WORDS[1]}" in
    backup|export|import) COMPREPLY=($(compgen -W "$words" -- "$cur") $(compgen -f -- "$cur")) ;;
    *) COMPREPLY=($(compgen -W "$words" -- "$cur")) ;;
  esac
}
complete -F _plant_store plant-store
`
}

/** Zsh: the same words through compadd, files through _files. */
function zsh(): string {
  const { top, next } = table()
  return `#compdef plant-store
# plant-store completion for zsh: source <(plant-store completion zsh)
_plant_store() {
  local key
  if (( CURRENT == 2 )); then
    compadd -- ${top.join(' ')}
    return
  fi
  key="\${words[2]}"
  if (( CURRENT > 3 )) && [[ "\${words[3]}" != -* ]]; then key="$key \${words[3]}"; fi
  local -a choices
  case "$key" in
${cases(next, '    ').replaceAll(' words="', ' choices=(').replaceAll('" ;;', ') ;;')}
  esac
  compadd -- $choices
  case "\${words[2]}" in
    backup|export|import) _files ;;
  esac
}
if (( $+functions[compdef] )); then compdef _plant_store plant-store; fi
`
}

export function completionCommand(args: string[]): void {
  const [shell, ...rest] = args
  if (rest.length > 0 || (shell !== 'bash' && shell !== 'zsh'))
    throw new UsageError('completion needs one shell: bash or zsh')
  process.stdout.write(shell === 'bash' ? bash() : zsh())
}
