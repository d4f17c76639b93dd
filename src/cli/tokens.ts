import { parseArgs } from 'node:util'
import {
  generateTokenId,
  generateTokenSecret,
  hashToken,
  parseDuration,
  DEFAULT_SCOPES,
  SCOPES,
} from '../auth/token-format.js'
import type { TokenRecord } from '../storage/storage.js'
import type { OpenStore } from './open-store.js'
import { CommandError, print, printSecret, table, UsageError } from './output.js'

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

async function create(open: OpenStore, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { name: { type: 'string' }, scopes: { type: 'string' }, 'expires-in': { type: 'string' } },
    strict: true,
  })
  const name = values.name?.trim()
  if (!name) throw new UsageError('tokens create needs --name NAME')
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
  if (values['expires-in'] !== undefined) {
    lifetimeMs = parseDuration(values['expires-in'])
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

async function list(open: OpenStore, args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { json: { type: 'boolean' } }, strict: true })
  const now = new Date()
  const tokens = (await (await open()).listTokens()).map((token) => describe(token, now))
  if (values.json) {
    print(JSON.stringify(tokens, null, 2))
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

async function revoke(open: OpenStore, args: string[]): Promise<void> {
  const { positionals } = parseArgs({ args, allowPositionals: true, strict: true })
  const id = positionals[0]
  if (!id || positionals.length > 1) throw new UsageError('tokens revoke needs exactly one token ID')
  const storage = await open()
  if (!(await storage.revokeToken(id))) {
    const known = (await storage.listTokens()).some((token) => token.id === id)
    throw new CommandError(known ? `token ${id} is already revoked` : `no token with id ${id}`)
  }
  print(`revoked ${id}`)
}

export async function tokensCommand(open: OpenStore, args: string[]): Promise<void> {
  const [action, ...rest] = args
  if (action === 'create') return create(open, rest)
  if (action === 'list') return list(open, rest)
  if (action === 'revoke') return revoke(open, rest)
  throw new UsageError(`unknown tokens command "${action ?? ''}"`)
}
