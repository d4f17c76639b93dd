import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'
import { countAuthFailure } from '../observability/metrics.js'
import type { AuthLimits } from '../http/rate-limits.js'
import type { Scope } from './token-format.js'
import type { TokenVerifier, Verification } from './token-verifier.js'

const REALM = 'Bearer realm="plant-store"'

const challenge = (
  error?: 'invalid_request' | 'invalid_token' | 'insufficient_scope',
  description?: string,
  scope?: string,
) => {
  let value = REALM
  if (error) value += `, error="${error}"`
  if (description) value += `, error_description="${description}"`
  if (scope) value += `, scope="${scope}"`
  return value
}

const unauthenticated = (message: string, header: string) =>
  new ApiError('UNAUTHENTICATED', message, { headers: { 'www-authenticate': header } })

/**
 * RFC 6750 2.3's third way, a token in the URL, which proxies, logs and browser histories keep.
 * It is refused whether or not a header carries one too (3.1: more than one method, or an
 * unsupported one, is an invalid_request, a 400), so a client that leaks it hears so at once.
 */
const tokenInQuery = () => {
  const rule = 'is not accepted: send the token in the Authorization header'
  return new ApiError('VALIDATION_FAILED', `query parameter access_token ${rule}`, {
    details: [{ field: 'access_token', rule }],
    headers: { 'www-authenticate': challenge('invalid_request', 'token in the query') },
  })
}

const reasons = {
  unknown: 'bearer token is not recognised',
  revoked: 'bearer token has been revoked',
  expired: 'bearer token has expired',
} as const

/**
 * An onRequest hook (RFC 6750): runs before the body is read, so a request without a valid token
 * never reaches parsing or validation. The scheme name is matched case-insensitively. It takes a
 * callback instead of being async so that a token found in the verifier's cache costs no promise.
 */
export function requireScope(
  verifier: TokenVerifier,
  scope: Scope,
  limits?: Pick<AuthLimits, 'failed' | 'used'>,
) {
  return function bearerAuth(
    request: FastifyRequest,
    _reply: FastifyReply,
    done: (error?: Error) => void,
  ): void {
    // A failure past the address's limit is a 429 instead of its 401 (http/rate-limits.ts). A
    // valid token is never refused for its address's failures: clients behind one NAT with an
    // attacker keep working, and a 256-bit token cannot be guessed in any number of tries.
    const fail = (error: ApiError) => {
      if (!limits) return done(error)
      limits.failed(request).then((refusal) => done(refusal ?? error), done)
    }
    const decide = (verification: Verification): void => {
      if (!verification.ok) {
        countAuthFailure(verification.reason)
        const reason = reasons[verification.reason]
        return fail(unauthenticated(reason, challenge('invalid_token', reason)))
      }
      // The token's id (never its secret) goes on the request for the log line.
      request.tokenId = verification.token.id
      if (!verification.token.scopes.includes(scope)) {
        countAuthFailure('insufficient_scope')
        return done(
          new ApiError('INSUFFICIENT_SCOPE', `token lacks the scope "${scope}" this operation needs`, {
            headers: { 'www-authenticate': challenge('insufficient_scope', `requires ${scope}`, scope) },
          }),
        )
      }
      if (!limits?.used) return done()
      limits.used(request).then(done, done)
    }
    if (Object.hasOwn(request.query as object, 'access_token')) {
      countAuthFailure('token_in_query')
      return done(tokenInQuery())
    }
    let secret: string
    try {
      secret = presentedSecret(request.headers.authorization)
    } catch (error) {
      countAuthFailure(request.headers.authorization ? 'malformed' : 'missing')
      return fail(error as ApiError)
    }
    const verification = verifier.verify(secret)
    if (!(verification instanceof Promise)) return decide(verification)
    verification.then(decide, done)
  }
}

/** A token68-like scheme name (RFC 9110 11.1); the scheme is whatever comes before the first SP/HTAB. */
const SCHEME = /^[A-Za-z][\w.~+/-]*$/

const isSpaceOrTab = (text: string, at: number) => text[at] === ' ' || text[at] === '\t'

/**
 * The parts of an Authorization value: the scheme, and what follows it with the SP/HTAB around it
 * trimmed. Each character is looked at a bounded number of times, whatever runs of spaces it holds:
 * a backtracking pattern here cost 150 ms of event loop per 16 KiB header.
 */
export function parseAuthorization(header: string): { scheme: string; rest: string } {
  let start = 0
  let end = header.length
  while (start < end && isSpaceOrTab(header, start)) start++
  while (end > start && isSpaceOrTab(header, end - 1)) end--
  let schemeEnd = start
  while (schemeEnd < end && !isSpaceOrTab(header, schemeEnd)) schemeEnd++
  let restStart = schemeEnd
  while (restStart < end && isSpaceOrTab(header, restStart)) restStart++
  return { scheme: header.slice(start, schemeEnd), rest: header.slice(restStart, end) }
}

/** The token in an `Authorization: Bearer <token>` header; throws the 401 for anything else. */
function presentedSecret(header: string | undefined): string {
  if (!header)
    throw unauthenticated('Authorization header is required: send "Authorization: Bearer <token>"', REALM)
  // Only SP and HTAB separate the scheme from the token (RFC 9110 11.4); JavaScript's \s also
  // took U+00A0 and other spaces, so `Bearer\xA0<token>` was accepted.
  const { scheme, rest: secret } = parseAuthorization(header)
  if (!SCHEME.test(scheme) || scheme.toLowerCase() !== 'bearer') {
    throw unauthenticated('Authorization header must use the Bearer scheme', REALM)
  }
  // No token at all is answered like no header (RFC 6750 3.1: no error code when none was sent).
  if (!secret) throw unauthenticated('Authorization header must carry a token after "Bearer"', REALM)
  if (/\s/.test(secret)) {
    throw unauthenticated(
      'Authorization header must carry exactly one bearer token',
      challenge('invalid_token', 'malformed token'),
    )
  }
  return secret
}
