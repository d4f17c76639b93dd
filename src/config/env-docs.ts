import { ENV_VARIABLES, type EnvVariable } from './env-schema.js'
import { formatSize } from './text-readers.js'

/** A variable's default as docs/configuration.md writes it (Markdown). */
export function defaultText(variable: EnvVariable): string {
  if (variable['x-default'] !== undefined) return variable['x-default']
  const value = variable.default
  if (value === undefined) return 'unset'
  if (variable['x-read'] === 'size' && typeof value === 'number') return `\`${formatSize(value)}\``
  return `\`${String(value)}\``
}

const HEADER = ['| Variable | Default | Meaning |', '|---|---|---|']

/** The `| Variable | Default | Meaning |` table of one `x-group`, in the schema's order. */
export function configurationTable(group: string): string {
  const rows = ENV_VARIABLES.filter(([, variable]) => variable['x-group'] === group).map(
    ([name, variable]) => `| \`${name}\` | ${defaultText(variable)} | ${variable.description} |`,
  )
  return [...HEADER, ...rows].join('\n')
}

/** `<!-- config-table GROUP -->` ... `<!-- /config-table -->`: where a generated table stands. */
const MARKED = /(<!-- config-table ([a-z]+) -->\n)[\s\S]*?(<!-- \/config-table -->)/g

/** The page with every marked table written anew from the schema. */
export function writeConfigurationTables(page: string): string {
  return page.replace(MARKED, (_all, open: string, group: string, close: string) => {
    return `${open}${configurationTable(group)}\n${close}`
  })
}
