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
  500: 'Unexpected server error',
  503:
    'Store unavailable; retry after Retry-After seconds. A write answered 503 is not acknowledged: it may or ' +
    'may not be stored, and retrying it is safe (a create is idempotent by id; a retried delete answers 404 ' +
    'if the first one happened).',
}

/** Every 503 carries it (error-handler.ts, health.ts). */
const retryAfter = {
  'Retry-After': { type: 'integer', minimum: 1, description: 'Seconds to wait before retrying.' },
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
 * (http/query-encoding.ts) and an unsupported Expect header (http/expect-header.ts).
 */
const ANY_ROUTE = [400, 417]

/**
 * Declares the given error statuses, and those of ANY_ROUTE, all with the Error body, for a
 * route's `response` schema.
 */
export function errorResponses(...statuses: number[]): Record<number, unknown> {
  const responses: Record<number, unknown> = {}
  for (const status of [...new Set([...statuses, ...ANY_ROUTE])].sort((a, b) => a - b)) {
    responses[status] = { $ref: 'Error', description: statusText[status] ?? 'Error' }
    if (status === 503) (responses[status] as Record<string, unknown>).headers = retryAfter
    if (status === 401 || status === 403) (responses[status] as Record<string, unknown>).headers = challenge
    // Where a token is needed, one sent in the query is a 400 with an invalid_request challenge.
    if (status === 400 && statuses.includes(401))
      (responses[status] as Record<string, unknown>).headers = tokenInQueryChallenge
  }
  return responses
}
