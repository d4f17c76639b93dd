import type { FastifyReply, FastifyRequest } from 'fastify'
import { ApiError } from '../errors.js'
import type { Scope } from './token-format.js'
import type { TokenVerifier } from './token-verifier.js'

const REALM = 'Bearer realm="plant-store"'

const challenge = (error?: 'invalid_token' | 'insufficient_scope', description?: string, scope?: string) => {
  let value = REALM
  if (error) value += `, error="${error}"`
  if (description) value += `, error_description="${description}"`
  if (scope) value += `, scope="${scope}"`
  return value
}

const unauthenticated = (message: string, header: string) =>
  new ApiError('UNAUTHENTICATED', message, { headers: { 'www-authenticate': header } })

const reasons = {
  unknown: 'bearer token is not recognised',
  revoked: 'bearer token has been revoked',
  expired: 'bearer token has expired',
} as const

/**
 * An onRequest hook (RFC 6750): runs before the body is read, so a request without a valid token
 * never reaches parsing or validation. The scheme name is matched case-insensitively.
 */
export function requireScope(verifier: TokenVerifier, scope: Scope) {
  return async function bearerAuth(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
    const header = request.headers.authorization
    if (!header)
      throw unauthenticated('Authorization header is required: send "Authorization: Bearer <token>"', REALM)
    const match = /^([A-Za-z][A-Za-z0-9._~+/-]*)(?:\s+(.*))?$/.exec(header.trim())
    if (match?.[1]?.toLowerCase() !== 'bearer') {
      throw unauthenticated('Authorization header must use the Bearer scheme', REALM)
    }
    const secret = match[2]?.trim()
    if (!secret || /\s/.test(secret)) {
      throw unauthenticated(
        'Authorization header must carry exactly one bearer token',
        challenge('invalid_token', 'malformed token'),
      )
    }
    const result = await verifier.verify(secret)
    if (!result.ok)
      throw unauthenticated(reasons[result.reason], challenge('invalid_token', reasons[result.reason]))
    if (!result.token.scopes.includes(scope)) {
      throw new ApiError('INSUFFICIENT_SCOPE', `token lacks the scope "${scope}" this operation needs`, {
        headers: { 'www-authenticate': challenge('insufficient_scope', `requires ${scope}`, scope) },
      })
    }
  }
}
