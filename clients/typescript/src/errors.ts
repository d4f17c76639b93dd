import type { ErrorCode, ErrorDetail } from './types.js'

/**
 * Codes the client gives to failures that never got an answer from the service; every other code
 * is the service's own (its error catalog).
 */
export type ClientErrorCode = 'TIMEOUT' | 'ABORTED' | 'NETWORK_ERROR' | 'UNEXPECTED_RESPONSE'

/**
 * The one error every call throws. `status` is the HTTP status (0 when no answer came), `code` the
 * service's stable catalog code (or a ClientErrorCode), `message` the service's message naming
 * the field and rule, `details` each field at fault.
 */
export class PlantStoreError extends Error {
  override readonly name = 'PlantStoreError'
  readonly status: number
  readonly code: ErrorCode | ClientErrorCode | undefined
  readonly details: ErrorDetail[]
  /** The service's X-Request-Id of the answer, to find its log line. */
  readonly requestId: string | undefined

  constructor(
    status: number,
    code: ErrorCode | ClientErrorCode | undefined,
    message: string,
    options: { details?: ErrorDetail[]; requestId?: string; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause })
    this.status = status
    this.code = code
    this.details = options.details ?? []
    this.requestId = options.requestId
  }
}
