import { isIP } from 'node:net'
import type { EnvVariable } from './env-schema.js'
import { parseHostList } from './postgres-host-list.js'

export class ConfigError extends Error {
  override name = 'ConfigError'
}

/**
 * Turns a variable's text (set, not blank) into its value, or throws a ConfigError naming the
 * variable and the rule. Bounds and enums are the schema's job (Ajv, after this).
 */
export type TextReader = (name: string, raw: string) => unknown

/** `16384` -> `16KiB`, `1048576` -> `1MiB`, `1` -> `1 byte`: how docs and messages write a size. */
export function formatSize(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)}MiB`
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024}KiB`
  return bytes === 1 ? '1 byte' : `${bytes} bytes`
}

function integer(name: string, raw: string): number {
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(`${name} must be a whole number, got "${raw}"`)
  return Number(raw.trim())
}

/** Sizes accept a plain byte count or a number with KiB/MiB (also kb/mb, k/m). */
function size(name: string, raw: string): number {
  const match = /^(\d+)\s*(b|k|kb|kib|m|mb|mib)?$/i.exec(raw.trim())
  if (!match) throw new ConfigError(`${name} must be a size such as 16384, 16KiB or 1MiB, got "${raw}"`)
  const unit = (match[2] ?? 'b').toLowerCase()
  const factor = unit.startsWith('m') ? 1024 * 1024 : unit.startsWith('k') ? 1024 : 1
  return Number(match[1]) * factor
}

function boolean(name: string, raw: string): boolean {
  const value = raw.trim().toLowerCase()
  if (['1', 'true', 'yes', 'on'].includes(value)) return true
  if (['0', 'false', 'no', 'off'].includes(value)) return false
  throw new ConfigError(`${name} must be true or false, got "${raw}"`)
}

const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full']

function postgresUrl(name: string, raw: string): string {
  const text = raw.trim()
  if (!/^postgres(ql)?:\/\//.test(text))
    throw new ConfigError(`${name} must start with postgres:// or postgresql://`)
  // libpq's host list (h1:p1,h2:p2) and target_session_attrs, which pg does not read itself.
  let url: URL
  try {
    url = new URL(parseHostList(text, name).urls[0] as string)
  } catch (error) {
    throw new ConfigError((error as Error).message)
  }
  // A misspelt mode would otherwise fail only later, as a TLS error from the driver.
  const sslmode = url.searchParams.get('sslmode')
  if (sslmode !== null && !SSL_MODES.includes(sslmode)) {
    throw new ConfigError(`${name} sslmode must be one of ${SSL_MODES.join(', ')}; got "${sslmode}"`)
  }
  return text
}

function httpUrl(name: string, raw: string): string {
  const text = raw.trim()
  let url: URL | undefined
  try {
    url = new URL(text)
  } catch {
    url = undefined
  }
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:')
    throw new ConfigError(`${name} must be an http:// or https:// URL, got "${text}"`)
  return text
}

/**
 * A file path. SQLite's `:memory:` became a file of that name in the working folder; an in-memory
 * store could not keep the durability promise anyway, nor be shared by workers.
 */
function filePath(name: string, raw: string): string {
  const text = raw.trim()
  if (text === ':memory:' || text.startsWith('file:')) {
    throw new ConfigError(
      `${name} must be a file path (a store in memory, or a file: URI, is not supported), got "${text}"`,
    )
  }
  return text
}

function proxyList(name: string, raw: string): boolean | string[] {
  const text = raw.trim()
  if (text.toLowerCase() === 'false') return false
  if (text.toLowerCase() === 'true') return true
  const entries = text.split(',').map((entry) => entry.trim())
  for (const entry of entries) {
    const [address = '', prefix, ...rest] = entry.split('/')
    const family = isIP(address)
    const prefixOk =
      prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 6 ? 128 : 32))
    if (!family || !prefixOk || rest.length > 0) {
      throw new ConfigError(
        `${name} must be true, false, or a comma-separated list of IP addresses or CIDR ranges, got "${entry}"`,
      )
    }
  }
  return entries
}

/**
 * Origins as a browser sends them (`https://app.example.com`, `http://localhost:3000`): a scheme,
 * a host and maybe a port, nothing else; `*` alone allows any origin.
 */
function originList(name: string, raw: string): string[] {
  const entries = raw
    .trim()
    .split(',')
    .map((entry) => entry.trim())
  if (entries.length === 1 && entries[0] === '*') return ['*']
  for (const entry of entries) {
    let origin: string | undefined
    try {
      origin = new URL(entry).origin
    } catch {
      origin = undefined
    }
    if (origin !== entry || !/^https?:/.test(entry)) {
      throw new ConfigError(
        `${name} must be * or a comma-separated list of origins such as https://app.example.com (scheme, host and port only), got "${entry}"`,
      )
    }
  }
  return entries
}

/** The readers an `x-read` names. */
const NAMED: Record<string, TextReader> = {
  size,
  'file-path': filePath,
  'postgres-url': postgresUrl,
  'http-url': httpUrl,
  'proxy-list': proxyList,
  'origin-list': originList,
}

/** The reader of a variable: its `x-read`, else the one its type implies. */
export function readerOf(variable: EnvVariable): TextReader {
  if (variable['x-read'] !== undefined) {
    const named = NAMED[variable['x-read']]
    if (!named) throw new Error(`no text reader "${variable['x-read']}"`)
    return named
  }
  if (variable.type === 'integer') return integer
  if (variable.type === 'boolean') return boolean
  // An enum's words are matched in any case; other text is taken as it is, spaces around dropped.
  if (variable.enum !== undefined) return (_name, raw) => raw.trim().toLowerCase()
  return (_name, raw) => raw.trim()
}
