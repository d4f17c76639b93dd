import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { ApiError, type ErrorCode, type ErrorDetail, errorCatalog } from '../errors.js'
import { countStoreError, type StoreErrorKind } from '../observability/metrics.js'
import { StoreReadOnlyError, StoreUnavailableError, StoreWriteError } from '../storage/storage.js'

const storeErrorKind = (error: StoreUnavailableError): StoreErrorKind =>
  error instanceof StoreReadOnlyError
    ? 'read_only'
    : error instanceof StoreWriteError
      ? 'write_failed'
      : 'unavailable'

export interface AjvError {
  keyword: string
  instancePath: string
  params: Record<string, unknown>
  message?: string
}

const contextNames: Record<string, string> = {
  body: 'body',
  params: 'path parameter',
  querystring: 'query parameter',
}

/** "must be an integer", where Ajv says "must be integer" and hand-written checks say the former. */
function typeRule(type: unknown): string {
  const name = Array.isArray(type) ? type.join(' or ') : String(type)
  return `must be ${/^[aeiou]/.test(name) ? 'an' : 'a'} ${name}`
}

/** Turns Ajv's first error into "name must NOT have more than 200 characters" style text. */
export function validationError(errors: AjvError[], context: string): ApiError {
  const details: ErrorDetail[] = errors.map((error) => {
    const path = error.instancePath.replace(/^\//, '').replaceAll('/', '.')
    if (error.keyword === 'required') {
      const missing = String(error.params.missingProperty)
      return { field: path ? `${path}.${missing}` : missing, rule: 'is required' }
    }
    if (error.keyword === 'type') return { field: path || context, rule: typeRule(error.params.type) }
    return { field: path || context, rule: error.message ?? error.keyword }
  })
  const first = details[0] ?? { field: context, rule: 'is invalid' }
  const where =
    contextNames[context] && context !== 'body' && first.field !== context ? `${contextNames[context]} ` : ''
  return new ApiError('VALIDATION_FAILED', `${where}${first.field} ${first.rule}`, { details })
}

const fastifyCodes: Record<string, ErrorCode> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'BODY_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'MALFORMED_JSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'MALFORMED_JSON',
}

function fromFastify(error: FastifyError, request: FastifyRequest, bodyLimit: number): ApiError | undefined {
  const code = fastifyCodes[error.code]
  if (code === 'BODY_TOO_LARGE') return new ApiError(code, `body must not be larger than ${bodyLimit} bytes`)
  if (code === 'UNSUPPORTED_MEDIA_TYPE') {
    const type = request.headers['content-type']
    return new ApiError(
      code,
      type
        ? `Content-Type must be application/json, got "${type}"`
        : 'Content-Type header is required: application/json',
    )
  }
  if (code === 'MALFORMED_JSON') {
    return new ApiError(
      code,
      error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY'
        ? 'body must be a JSON object, got an empty body'
        : error.message,
    )
  }
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return new ApiError(error.statusCode === 413 ? 'BODY_TOO_LARGE' : 'VALIDATION_FAILED', error.message)
  }
  return undefined
}

/** Writes the seed's Error shape with the HTTP status in `error`; nothing internal leaks in a 500. */
export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  reply.headers(error.headers)
  const body: Record<string, unknown> = { error: error.status, message: error.message, code: error.code }
  if (error.details) body.details = error.details
  return reply.code(error.status).type('application/json; charset=utf-8').send(body)
}

export function installErrorHandler(app: FastifyInstance, bodyLimit: number): void {
  app.setErrorHandler((raw: FastifyError, request, reply) => {
    let error: ApiError
    if (raw instanceof ApiError) error = raw
    else if (raw.validation)
      error = validationError(raw.validation as AjvError[], raw.validationContext ?? 'body')
    else if (raw instanceof StoreUnavailableError) {
      countStoreError(storeErrorKind(raw))
      request.log.warn({ err: raw }, 'store unavailable')
      error = new ApiError('STORE_UNAVAILABLE', 'the store is unavailable; retry later', {
        headers: { 'retry-after': '5' },
      })
    } else {
      const mapped = fromFastify(raw, request, bodyLimit)
      if (mapped) error = mapped
      else {
        request.log.error({ err: raw }, 'unhandled error')
        error = new ApiError('INTERNAL', 'internal server error')
      }
    }
    return sendError(reply, error)
  })
}

export { errorCatalog }
