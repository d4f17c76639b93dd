import { createHash, randomBytes } from 'node:crypto'

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

export const TOKEN_PREFIX = 'pst_'
export const SCOPES = ['plants:read', 'plants:write', 'metrics:read'] as const
export type Scope = (typeof SCOPES)[number]
/** What `tokens create` gives without --scopes: the API's, not the metrics'. */
export const DEFAULT_SCOPES: readonly Scope[] = ['plants:read', 'plants:write']

/** Uniform base62 characters: bytes of 248 and above are dropped so no character is favoured. */
export function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62]
    }
  }
  return out
}

/** Base62 characters after the prefix: about 256 bits. */
const SECRET_LENGTH = 43

/** A new secret: `pst_` + 43 base62 characters. */
export function generateTokenSecret(): string {
  return TOKEN_PREFIX + randomBase62(SECRET_LENGTH)
}

const TOKEN_SHAPE = new RegExp(`^${TOKEN_PREFIX}[0-9A-Za-z]{${SECRET_LENGTH}}$`)

/**
 * Text that may hold a token or its secret part: the prefix in any case, or a run of base62 as
 * long as a secret (which a long tag may also be; it only decides what the log leaves out).
 */
export const TOKEN_IN_TEXT = new RegExp(`${TOKEN_PREFIX}|[0-9A-Za-z]{${SECRET_LENGTH}}`, 'i')

/** Whether `secret` has the form generateTokenSecret gives; no other secret was ever issued. */
export function isTokenShaped(secret: string): boolean {
  return TOKEN_SHAPE.test(secret)
}

export function generateTokenId(): string {
  return `tok_${randomBase62(16)}`
}

/** Only this hash is stored; lookups hash the presented token and search by it. */
export function hashToken(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

/** Parses durations like `30d`, `12h`, `15m`, `45s`, `2w`; undefined when malformed. */
export function parseDuration(text: string): number | undefined {
  const match = /^(\d+)\s*(s|m|h|d|w)$/.exec(text.trim())
  if (!match) return undefined
  const unit = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 }[match[2] as 's' | 'm' | 'h' | 'd' | 'w']
  const ms = Number(match[1]) * unit * 1000
  return ms > 0 ? ms : undefined
}
