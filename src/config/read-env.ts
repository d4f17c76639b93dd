import { ENV_VARIABLES, type EnvName, type EnvVariable } from './env-schema.js'
import { ConfigError, formatSize, readerOf } from './text-readers.js'

type Env = Record<string, string | undefined>

/**
 * The schema's rules on a value its reader produced: `minimum`, `maximum` and `enum`, the only
 * keywords the readers leave to check. Read here rather than compiled with Ajv, which cost every
 * start (the CLI's included) about 50 ms of CPU; test/unit/config-schema.test.ts holds this to
 * Ajv's verdicts on every variable's bounds and words.
 */
export function breaksRule(variable: EnvVariable, value: unknown): 'range' | 'enum' | undefined {
  if (typeof value === 'number') {
    const { minimum = -Infinity, maximum = Infinity } = variable
    if (value < minimum || value > maximum) return 'range'
  }
  if (variable.enum !== undefined && !variable.enum.includes(value as string)) return 'enum'
  return undefined
}

/** One line naming the variable, its rule and the text it was given. */
function message(name: string, variable: EnvVariable, rule: 'range' | 'enum', raw: string, value: unknown) {
  if (rule === 'enum') return `${name} must be one of ${variable.enum?.join(', ')}, got "${raw}"`
  const { minimum = 0, maximum = 0 } = variable
  if (variable['x-read'] === 'size')
    return `${name} must be between ${formatSize(minimum)} and ${formatSize(maximum)}, got "${raw}"`
  return `${name} must be between ${minimum} and ${maximum}, got ${String(value)}`
}

/**
 * Every variable's value, by name: its text read by its reader and checked against its schema,
 * or its default where it is unset or blank (undefined for a variable without one). Throws a
 * ConfigError naming the first variable at fault, in the schema's order.
 */
export function readEnv(env: Env): Partial<Record<EnvName, unknown>> {
  const values: Partial<Record<EnvName, unknown>> = {}
  for (const [name, variable] of ENV_VARIABLES) {
    const raw = env[name]
    if (raw === undefined || raw.trim() === '') {
      if (raw !== undefined && variable['x-empty'] !== undefined)
        throw new ConfigError(`${name} is set but empty: ${variable['x-empty']}`)
      values[name] = variable.default
      continue
    }
    const value = readerOf(variable)(name, raw)
    const rule = breaksRule(variable, value)
    if (rule) throw new ConfigError(message(name, variable, rule, raw, value))
    values[name] = value
  }
  return values
}
