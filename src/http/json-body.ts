import type { FastifyInstance, FastifyRequest } from 'fastify'
import { isLosslessNumber, parse as parseLossless } from 'lossless-json'
import secureJson from 'secure-json-parse'
import { ApiError } from '../errors.js'

/** Where the parser leaves the exact text of a top-level `id` that JSON.parse had to round. */
export const exactIdLiteral = Symbol('exactIdLiteral')

type JsonObject = Record<string, unknown> & { [exactIdLiteral]?: string }

const malformed = (message: string) => new ApiError('MALFORMED_JSON', message)

/**
 * Replaces Fastify's JSON parser. Parsing stays on the fast native path; only when the top-level
 * `id` is an integer JSON.parse could not hold exactly is the body parsed again losslessly, and
 * the digits kept beside the object (a symbol key, invisible to validation and storage).
 */
export function registerJsonBodyParser(app: FastifyInstance): void {
  // Fastify also parses text/plain by default; this API takes JSON only, anything else is a 415.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, text, done) => {
    try {
      done(null, parseJsonBody(request, text as string))
    } catch (error) {
      done(error as Error, undefined)
    }
  })
}

function parseJsonBody(request: FastifyRequest, text: string): JsonObject {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(request.headers['content-type'] ?? '')?.[1]
  if (charset && charset.toLowerCase() !== 'utf-8' && charset.toLowerCase() !== 'utf8') {
    throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `Content-Type charset must be utf-8, got "${charset}"`)
  }
  if (text.trim() === '') throw malformed('body must be a JSON object, got an empty body')
  let body: unknown
  try {
    body = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' })
  } catch (error) {
    if (error instanceof SyntaxError && /prototype/i.test(error.message)) {
      throw malformed('body must not contain "__proto__" or "constructor.prototype" keys')
    }
    if (error instanceof RangeError) throw malformed('body is nested too deeply')
    throw malformed(`body is not valid JSON: ${(error as Error).message}`)
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw malformed(
      `body must be a JSON object, got ${body === null ? 'null' : Array.isArray(body) ? 'an array' : typeof body}`,
    )
  }
  const object = body as JsonObject
  const id = object.id
  if (typeof id === 'number' && Number.isFinite(id) && Number.isInteger(id) && !Number.isSafeInteger(id)) {
    object[exactIdLiteral] = exactTopLevelIdLiteral(text)
  }
  return object
}

function exactTopLevelIdLiteral(text: string): string {
  let exact: unknown
  try {
    exact = (parseLossless(text) as Record<string, unknown>).id
  } catch (error) {
    throw malformed(`body could not be read exactly: ${(error as Error).message}`)
  }
  return isLosslessNumber(exact) ? exact.value : String(exact)
}
