import type { Storage, TokenRecord } from '../storage/storage.js'
import { hashToken, isTokenShaped } from './token-format.js'

export type Verification =
  { ok: true; token: TokenRecord } | { ok: false; reason: 'unknown' | 'revoked' | 'expired' }

const TOUCH_INTERVAL_MS = 60_000
const MAX_CACHED = 10_000

/**
 * Resolves presented secrets to token records. Records are cached for at most `cacheMs` (≤ 1 s),
 * which bounds how long a revocation through another process can go unseen; expiry is checked
 * on every request. `last_used_at` is written at most once a minute per token, so reads never
 * turn into a write per request.
 */
export class TokenVerifier {
  private readonly cache = new Map<string, { record: TokenRecord | undefined; at: number }>()
  private readonly touchedAt = new Map<string, number>()

  constructor(
    private readonly storage: Storage,
    private readonly cacheMs: number,
  ) {}

  /**
   * The verdict for a secret. A cached record is judged synchronously, so the common request
   * costs no promise; otherwise the store is asked first.
   */
  verify(secret: string): Verification | Promise<Verification> {
    const now = Date.now()
    // Keyed by the presented secret, so a cached token costs no SHA-256 per request; the secret
    // stays only in this process's memory, where the request carrying it already is.
    const entry = this.cache.get(secret)
    if (entry && now - entry.at < this.cacheMs) return this.judge(entry.record, now)
    // Only secrets this service could have issued are looked up, and so cached: keyed by anything a
    // client sends, 10,000 distinct 16 KiB headers pinned 180 MB until the cache filled and cleared.
    if (!isTokenShaped(secret)) return { ok: false, reason: 'unknown' }
    return this.storage.findTokenByHash(hashToken(secret)).then((record) => {
      if (this.cacheMs > 0) {
        if (this.cache.size >= MAX_CACHED) this.cache.clear()
        this.cache.set(secret, { record, at: now })
      }
      return this.judge(record, now)
    })
  }

  private judge(record: TokenRecord | undefined, now: number): Verification {
    if (!record) return { ok: false, reason: 'unknown' }
    if (record.revokedAt) return { ok: false, reason: 'revoked' }
    if (record.expiresAt && record.expiresAt.getTime() <= now) return { ok: false, reason: 'expired' }
    this.touch(record.id, now)
    return { ok: true, token: record }
  }

  private touch(id: string, now: number): void {
    const last = this.touchedAt.get(id) ?? 0
    if (now - last < TOUCH_INTERVAL_MS) return
    this.touchedAt.set(id, now)
    // Bookkeeping only: a failure here must not fail the request it rides on.
    this.storage.touchToken(id, new Date(now)).catch(() => this.touchedAt.delete(id))
  }
}
