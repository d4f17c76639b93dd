import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'
import { countAuthFailure } from '../observability/metrics.js'
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
export function requireScope(verifier: TokenVerifier, scope: Scope) {
  const decide = (verification: Verification): ApiError | undefined => {
    if (!verification.ok) {
      countAuthFailure(verification.reason)
      const reason = reasons[verification.reason]
      return unauthenticated(reason, challenge('invalid_token', reason))
    }
    if (verification.token.scopes.includes(scope)) return undefined
    countAuthFailure('insufficient_scope')
    return new ApiError('INSUFFICIENT_SCOPE', `token lacks the scope "${scope}" this operation needs`, {
      headers: { 'www-authenticate': challenge('insufficient_scope', `requires ${scope}`, scope) },
    })
  }
  return function bearerAuth(
    request: FastifyRequest,
    _reply: FastifyReply,
    done: (error?: Error) => void,
  ): void {
    if (Object.hasOwn(request.query as object, 'access_token')) {
      countAuthFailure('token_in_query')
      return done(tokenInQuery())
    }
    let secret: string
    try {
      secret = presentedSecret(request.headers.authorization)
    } catch (error) {
      countAuthFailure(request.headers.authorization ? 'malformed' : 'missing')
      return done(error as Error)
    }
    const verification = verifier.verify(secret)
    if (!(verification instanceof Promise)) return done(decide(identify(request, verification)))
    verification.then((result) => done(decide(identify(request, result))), done)
  }
}

/** Notes the token's id (never its secret) on the request for the log line. */
function identify(request: FastifyRequest, verification: Verification): Verification {
  if (verification.ok) request.tokenId = verification.token.id
  return verification
}

/** The token in an `Authorization: Bearer <token>` header; throws the 401 for anything else. */
function presentedSecret(header: string | undefined): string {
  if (!header)
    throw unauthenticated('Authorization header is required: send "Authorization: Bearer <token>"', REALM)
  // Only SP and HTAB separate the scheme from the token (RFC 9110 11.4); JavaScript's \s also
  // took U+00A0 and other spaces, so `Bearer\xA0<token>` was accepted.
  const match = /^[ \t]*([A-Za-z][A-Za-z0-9._~+/-]*)(?:[ \t]+(.*?))?[ \t]*$/.exec(header)
  if (match?.[1]?.toLowerCase() !== 'bearer') {
    throw unauthenticated('Authorization header must use the Bearer scheme', REALM)
  }
  const secret = match[2]
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
