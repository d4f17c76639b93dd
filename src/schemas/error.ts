import { errorCatalog } from '../errors.js'

/** The seed's Error shape, with the catalog code and per-field details added as optional extras. */
export const ErrorBody = {
  type: 'object',
  required: ['error', 'message'],
  properties: {
    error: { type: 'integer', format: 'int32', description: 'Numeric error value: the HTTP status code.' },
    message: { type: 'string', description: 'Error message text; names the field and the rule it broke.' },
    code: {
      type: 'string',
      description: 'Stable machine-readable code from the error catalog.',
      enum: Object.keys(errorCatalog),
    },
    details: {
      type: 'array',
      items: {
        type: 'object',
        required: ['field', 'rule'],
        properties: {
          field: { type: 'string', description: 'The field, parameter or header at fault.' },
          rule: { type: 'string', description: 'The rule it broke.' },
        },
      },
    },
  },
  $id: 'Error',
}

const statusText: Record<number, string> = {
  400: 'Bad request: malformed JSON, a field or parameter that breaks a rule, or a malformed query string',
  401: 'Missing, unknown, revoked or expired bearer token',
  403: 'The token lacks the scope this operation needs',
  404: 'Not found',
  409: 'Conflict with the stored plant of the same id',
  413: 'Body larger than the configured limit',
  415: 'Content-Type is not application/json',
  417: 'An Expect header other than 100-continue',
  429: 'Too many failed authentications from this address, or too many requests with this token',
  500: 'Unexpected server error',
  503:
    'Store unavailable, the service sheds load (OVERLOADED), or the connection is over a connection cap (TOO_MANY_CONNECTIONS, then closed); ' +
    'retry after Retry-After seconds. A write answered 503 is not acknowledged: it may or ' +
    'may not be stored, and retrying it is safe (a create is idempotent by id; a retried delete answers 404 ' +
    'if the first one happened).',
}

const rule = (field: string, text: string) => ({ details: [{ field, rule: text }] })

/** One example body per status: a real answer of the service, as a client sees it. */
export const errorExamples: Record<number, Record<string, unknown>> = {
  400: {
    error: 400,
    message: 'name must NOT have fewer than 1 characters',
    code: 'VALIDATION_FAILED',
    ...rule('name', 'must NOT have fewer than 1 characters'),
  },
  401: {
    error: 401,
    message: 'Authorization header is required: send "Authorization: Bearer <token>"',
    code: 'UNAUTHENTICATED',
  },
  403: {
    error: 403,
    message: 'token lacks the scope "plants:write" this operation needs',
    code: 'INSUFFICIENT_SCOPE',
  },
  404: { error: 404, message: 'no plant with id 10', code: 'NOT_FOUND' },
  409: {
    error: 409,
    message:
      'id 10 already belongs to a plant with a different name; resend the same name and tag, or use another id',
    code: 'PLANT_CONFLICT',
    ...rule('name', 'differs from the stored plant with this id'),
  },
  413: { error: 413, message: 'body must not be larger than 16384 bytes', code: 'BODY_TOO_LARGE' },
  415: {
    error: 415,
    message: 'Content-Type must be application/json, got "text/plain"',
    code: 'UNSUPPORTED_MEDIA_TYPE',
  },
  417: {
    error: 417,
    message: 'Expect header "200-ok" is not supported: only 100-continue is',
    code: 'EXPECTATION_FAILED',
    ...rule('Expect', 'must be absent or 100-continue'),
  },
  429: {
    error: 429,
    message: 'more than 100 failed authentications from this address in 60 s; retry after 42 s',
    code: 'TOO_MANY_REQUESTS',
  },
  500: { error: 500, message: 'internal server error', code: 'INTERNAL' },
  503: { error: 503, message: 'the store is unavailable; retry later', code: 'STORE_UNAVAILABLE' },
}

/** Every 503 carries it (error-handler.ts, health.ts). */
const retryAfter = {
  'Retry-After': { type: 'integer', minimum: 1, description: 'Seconds to wait before retrying.' },
}

/**
 * Every 429 carries these (http/rate-limits.ts), as draft-ietf-httpapi-ratelimit-headers names
 * them. The limits are per instance: behind a load balancer each instance counts on its own.
 */
const rateLimited = {
  ...retryAfter,
  'RateLimit-Limit': {
    type: 'integer',
    minimum: 1,
    description: 'Requests (or failures) allowed per window.',
  },
  'RateLimit-Remaining': { type: 'integer', minimum: 0, description: 'What is left of them: 0.' },
  'RateLimit-Reset': { type: 'integer', minimum: 1, description: 'Seconds until the window resets.' },
}

/** Every 401 and 403 carries the RFC 6750 challenge (auth/bearer-auth.ts). */
const challenge = {
  'WWW-Authenticate': {
    type: 'string',
    description:
      'RFC 6750 challenge: `Bearer realm="plant-store"`, with `error="invalid_token"` for a token that is ' +
      'not accepted and `error="insufficient_scope"` plus the `scope` needed on a 403.',
  },
}

const tokenInQueryChallenge = {
  'WWW-Authenticate': {
    type: 'string',
    description:
      'Sent with the 400 for an `access_token` query parameter (a token is only taken from the ' +
      'Authorization header): `Bearer realm="plant-store", error="invalid_request"`.',
  },
}

/**
 * What any route can answer before its own work: a query string with bad percent-encoding
 * (http/query-encoding.ts), an unsupported Expect header (http/expect-header.ts), and a connection
 * over a connection cap (http/connection-limits.ts: 503 TOO_MANY_CONNECTIONS).
 */
const ANY_ROUTE = [400, 417, 503]

/**
 * Declares the given error statuses, and those of ANY_ROUTE, all with the Error body, for a
 * route's `response` schema.
 */
export function errorResponses(...statuses: number[]): Record<number, unknown> {
  const responses: Record<number, unknown> = {}
  // Where a token is checked, failures and requests per token are rate limited.
  const limited = statuses.includes(401) ? [429] : []
  for (const status of [...new Set([...statuses, ...limited, ...ANY_ROUTE])].sort((a, b) => a - b)) {
    responses[status] = { $ref: 'Error', description: statusText[status] ?? 'Error' }
    if (status === 503) (responses[status] as Record<string, unknown>).headers = retryAfter
    if (status === 429) (responses[status] as Record<string, unknown>).headers = rateLimited
    if (status === 401 || status === 403) (responses[status] as Record<string, unknown>).headers = challenge
    // Where a token is needed, one sent in the query is a 400 with an invalid_request challenge.
    if (status === 400 && statuses.includes(401))
      (responses[status] as Record<string, unknown>).headers = tokenInQueryChallenge
  }
  return responses
}
