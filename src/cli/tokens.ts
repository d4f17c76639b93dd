import {
  generateTokenId,
  generateTokenSecret,
  hashToken,
  parseDuration,
  DEFAULT_SCOPES,
  SCOPES,
} from '../auth/token-format.js'
import type { TokenRecord } from '../storage/storage.js'
import { paint, useColour } from '../colour.js'
import type { OpenStore } from './open-store.js'
import {
  CommandError,
  escapeControls,
  print,
  printEscaped,
  printSecret,
  table,
  UsageError,
} from './output.js'
import { relativeTime } from './relative-time.js'

const MAX_EXPIRY_MS = 36_500 * 86_400_000

const describe = (token: TokenRecord, now: Date) => ({
  id: token.id,
  name: token.name,
  scopes: token.scopes,
  created: token.createdAt.toISOString(),
  expires: token.expiresAt?.toISOString() ?? null,
  lastUsed: token.lastUsedAt?.toISOString() ?? null,
  revoked: token.revokedAt?.toISOString() ?? null,
  status: token.revokedAt ? 'revoked' : token.expiresAt && token.expiresAt <= now ? 'expired' : 'active',
})

/** `tokens create`. */
export async function createToken(
  open: OpenStore,
  values: { name?: string; scopes?: string; expiresIn?: string },
): Promise<void> {
  const name = values.name?.trim()
  if (!name) throw new UsageError('--name NAME is required')
  // It is printed in `tokens list`'s table: a control character or a page of text would break it,
  // and a format character (U+202E reverses what follows) would make it lie.
  // Counted in characters (code points), as name and tag are: an emoji is one, not two.
  if ([...name].length > 100 || /[\p{Cc}\p{Cf}]/u.test(name)) {
    throw new UsageError(
      '--name must be at most 100 characters, with no control or format characters (newline, tab, U+202E, ...)',
    )
  }
  const scopes = (values.scopes ?? DEFAULT_SCOPES.join(','))
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s))
  if (unknown.length || scopes.length === 0) {
    throw new UsageError(
      `--scopes must be a comma-separated list of ${SCOPES.join(', ')}; got "${values.scopes}"`,
    )
  }
  let lifetimeMs: number | undefined
  if (values.expiresIn !== undefined) {
    lifetimeMs = parseDuration(values.expiresIn)
    if (lifetimeMs === undefined) throw new UsageError('--expires-in must look like 30d, 12h, 15m, 45s or 2w')
    // Far enough out, the Date is Invalid Date, which would be stored as "never".
    if (lifetimeMs > MAX_EXPIRY_MS) throw new UsageError('--expires-in must be at most 100 years (36500d)')
  }
  const secret = generateTokenSecret()
  const id = generateTokenId()
  const storage = await open({ create: true })
  // From the creation time itself: counted before the store was opened, `1s` came out 995 ms.
  const createdAt = new Date()
  await storage.createToken({
    id,
    name,
    scopes: [...new Set(scopes)],
    hash: hashToken(secret),
    createdAt,
    expiresAt: lifetimeMs === undefined ? null : new Date(createdAt.getTime() + lifetimeMs),
    lastUsedAt: null,
    revokedAt: null,
  })
  // The secret alone on stdout, so `TOKEN=$(plant-store tokens create ...)` works; it is shown once.
  await printSecret(secret, 'the token', async () => {
    await storage.revokeToken(id)
    return `token ${id} is revoked: create another`
  })
}

/** `tokens list`: a table that fits the terminal on a TTY, ISO times when piped or with --json. */
export async function listTokens(open: OpenStore, values: { json?: boolean }): Promise<void> {
  const now = new Date()
  const tokens = (await (await open()).listTokens()).map((token) => describe(token, now))
  if (values.json) {
    print(JSON.stringify(tokens, null, 2))
    return
  }
  if (process.stdout.isTTY) {
    printEscaped(terminalTable(tokens, now))
    return
  }
  const rows = tokens.map((t) => ({
    ...t,
    scopes: t.scopes.join(','),
    expires: t.expires ?? 'never',
    lastUsed: t.lastUsed ?? 'never',
    revoked: t.revoked ?? '',
  }))
  print(table(rows, ['id', 'name', 'scopes', 'status', 'created', 'expires', 'lastUsed']))
}

type TokenView = ReturnType<typeof describe>

/**
 * At most the terminal's width (80 columns when it gives none): scopes without their `plants:`
 * prefix, relative times, the status folded into EXPIRES, and a long name cut with `…`.
 */
function terminalTable(tokens: TokenView[], now: Date): string {
  const width = process.stdout.columns || 80
  const when = (iso: string | null) => (iso === null ? 'never' : relativeTime(new Date(iso), now))
  const rows = tokens.map((t) => ({
    id: t.id,
    name: escapeControls(t.name),
    scopes: t.scopes.map((s) => s.replace(/^plants:/, '').replace(/^metrics:read$/, 'metrics')).join(','),
    expires: t.status === 'active' ? (t.expires === null ? 'never' : when(t.expires)) : t.status,
    'last used': when(t.lastUsed),
  }))
  const columns = ['id', 'name', 'scopes', 'expires', 'last used'] as const
  const widthOf = (column: (typeof columns)[number]) =>
    Math.max(column.length, ...rows.map((row) => [...row[column]].length))
  const others = columns.filter((c) => c !== 'name').reduce((sum, c) => sum + widthOf(c) + 2, 0)
  const nameWidth = Math.max(4, Math.min(widthOf('name'), width - others))
  const cut = (text: string) =>
    [...text].length > nameWidth ? `${[...text].slice(0, nameWidth - 1).join('')}…` : text
  const colour = useColour(process.stdout)
  const line = (cells: Record<(typeof columns)[number], string>, header = false) =>
    columns
      .map((c) => {
        const text = c === 'name' ? cut(cells[c]) : cells[c]
        const padded = text.padEnd(c === 'name' ? nameWidth : widthOf(c))
        if (header || c !== 'expires' || !colour) return padded
        return paint(true, text === 'revoked' || text === 'expired' ? 'red' : 'green', padded)
      })
      .join('  ')
      .trimEnd()
  const header = Object.fromEntries(columns.map((c) => [c, c.toUpperCase()])) as Record<
    (typeof columns)[number],
    string
  >
  return [line(header, true), ...rows.map((row) => line(row))].join('\n')
}

/** `tokens revoke ID`. */
export async function revokeToken(open: OpenStore, id: string): Promise<void> {
  const storage = await open()
  if (!(await storage.revokeToken(id))) {
    const known = (await storage.listTokens()).some((token) => token.id === id)
    throw new CommandError(known ? `token ${id} is already revoked` : `no token with id ${id}`)
  }
  print(`revoked ${id}`)
}
