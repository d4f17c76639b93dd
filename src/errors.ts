import { plantFieldWords } from './schemas/plant.js'

/**
 * The error catalog. Each entry has a stable `code` (never reused once retired), the HTTP status
 * it maps to, and a one-line description for the served OpenAPI document; docs/api.md lists the same codes.
 * Handlers throw `ApiError`; one error handler in `http/error-handler.ts` writes the Error shape.
 */
export const errorCatalog = {
  VALIDATION_FAILED: {
    status: 400,
    description: 'The request body, a path or a query parameter breaks a rule.',
  },
  MALFORMED_JSON: {
    status: 400,
    description:
      'The body is not valid UTF-8 or not valid JSON, is empty, is not an object, or nests arrays and objects deeper than 64 levels.',
  },
  UNAUTHENTICATED: {
    status: 401,
    description: 'No bearer token, another scheme, or an unknown, revoked or expired token.',
  },
  INSUFFICIENT_SCOPE: {
    status: 403,
    description: 'The token is valid but lacks the scope the operation needs.',
  },
  NOT_FOUND: { status: 404, description: 'No plant with that id.' },
  ROUTE_NOT_FOUND: { status: 404, description: 'No such route.' },
  METHOD_NOT_ALLOWED: {
    status: 405,
    description: 'The path exists but not with this method; see the Allow header.',
  },
  PLANT_CONFLICT: {
    status: 409,
    description: `A plant with this id exists with a different ${plantFieldWords('or')}.`,
  },
  EXPECTATION_FAILED: {
    status: 417,
    description: 'The Expect header asks for something other than 100-continue.',
  },
  BODY_TOO_LARGE: { status: 413, description: 'The body is larger than BODY_LIMIT.' },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    description:
      'The Content-Type is missing or is not application/json, or the body has a Content-Encoding.',
  },
  TOO_MANY_REQUESTS: {
    status: 429,
    description:
      'Too many failed authentications from this address (AUTH_FAILURE_LIMIT), or too many requests with this token (TOKEN_RATE_LIMIT); retry after the Retry-After delay.',
  },
  OVERLOADED: {
    status: 503,
    description:
      'The service sheds load: its event loop lags or its heap is nearly full; retry after the Retry-After delay.',
  },
  TOO_MANY_CONNECTIONS: {
    status: 503,
    description:
      'The service holds as many connections as it may (MAX_CONNECTIONS), or this client address holds MAX_CONNECTIONS_PER_ADDRESS; the connection is closed after this answer; retry after the Retry-After delay.',
  },
  STORE_UNAVAILABLE: {
    status: 503,
    description: 'The database cannot be reached; retry after the Retry-After delay.',
  },
  INTERNAL: { status: 500, description: 'A bug on our side; the body carries no internals.' },
  // Answered by the HTTP server before any route, then the connection is closed (client-errors.ts).
  BAD_HTTP_REQUEST: {
    status: 400,
    description:
      'The request is not valid HTTP/1.1 (an unknown method, a malformed header, conflicting framing, Transfer-Encoding in HTTP/1.0); the connection is closed.',
  },
  REQUEST_TIMEOUT: {
    status: 408,
    description:
      'The headers did not all arrive within HEADERS_TIMEOUT_MS, or the request within REQUEST_TIMEOUT_MS.',
  },
  URI_TOO_LONG: {
    status: 414,
    description:
      'The request line (method, target and version) is longer than 16 KiB; sent before any route runs.',
  },
  HEADERS_TOO_LARGE: {
    status: 431,
    description:
      'The request line and headers are larger than 16 KiB as written, or have 2,000 lines or more; the connection is closed.',
  },
  // Answered by connect.ts on the raw socket, then the connection is closed; a CONNECT to a known
  // path is a METHOD_NOT_ALLOWED like any other method.
  METHOD_NOT_IMPLEMENTED: {
    status: 501,
    description:
      'A CONNECT to anything but a known path: the service is no proxy and opens no tunnels; sent before any route.',
  },
  // Answered by message-framing.ts before the route's own checks, then the connection is closed.
  UNSUPPORTED_TRANSFER_CODING: {
    status: 501,
    description:
      'A Transfer-Encoding other than chunked alone (gzip, chunked, say): the service applies no transfer coding but chunked.',
  },
  HTTP_VERSION_NOT_SUPPORTED: {
    status: 505,
    description: 'The request line names an HTTP version other than 1.1 or 1.0.',
  },
} as const satisfies Record<string, { status: number; description: string }>

export type ErrorCode = keyof typeof errorCatalog

export interface ErrorDetail {
  field: string
  rule: string
}

/** An expected failure with a catalog code; its message names the field and the rule. */
export class ApiError extends Error {
  override name = 'ApiError'
  readonly status: number
  readonly headers: Record<string, string>

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: { headers?: Record<string, string>; details?: ErrorDetail[] } = {},
  ) {
    super(message)
    this.status = errorCatalog[code].status
    this.headers = options.headers ?? {}
    this.details = options.details
  }

  readonly details: ErrorDetail[] | undefined
}
