import { isUtf8 } from 'node:buffer'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import secureJson from 'secure-json-parse'
import { ApiError } from '../errors.js'
import { topLevelMemberLiteral } from './json-member-literal.js'
import { describeJsonSyntaxError } from './json-syntax-error.js'

/** Where the parser leaves the exact text of a top-level `id` that JSON.parse may have rounded. */
export const exactIdLiteral = Symbol('exactIdLiteral')

type JsonObject = Record<string, unknown> & { [exactIdLiteral]?: string }

const malformed = (message: string) => new ApiError('MALFORMED_JSON', message)

/**
 * Arrays and objects nested deeper than this are refused. A NewPlant nests one level, and unknown
 * properties are ignored anyway; without a bound, a body of brackets is only limited by
 * BODY_LIMIT.
 */
export const MAX_NESTING = 64

/**
 * Replaces Fastify's JSON parser. Parsing stays on the fast native path; the `id` member's source
 * text is read back only when JSON.parse may have changed it: an integer beyond 2^53, or a body
 * holding a fraction or exponent anywhere (`300000.00000000001` parses to the integer 300000).
 * The literal is kept beside the object (a symbol key, invisible to validation and storage), and
 * `bodyId` turns it into the exact id or a 400. Reading it back never refuses a body JSON.parse
 * took (see json-member-literal.ts), so whether a body is accepted never depends on its id's size.
 */
export function registerJsonBodyParser(app: FastifyInstance): void {
  // Fastify also parses text/plain by default; this API takes JSON only, anything else is a 415.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, raw, done) => {
    try {
      done(null, parseJsonBody(request, raw as Buffer))
    } catch (error) {
      done(error as Error, undefined)
    }
  })
}

function parseJsonBody(request: FastifyRequest, raw: Buffer): JsonObject {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(request.headers['content-type'] ?? '')?.[1]
  if (charset && charset.toLowerCase() !== 'utf-8' && charset.toLowerCase() !== 'utf8') {
    throw new ApiError('UNSUPPORTED_MEDIA_TYPE', `Content-Type charset must be utf-8, got "${charset}"`)
  }
  return parseJsonObject(raw)
}

/**
 * The body rules on their own, for any JSON object text the API takes (a request body, a line of
 * `plant-store import`): UTF-8, a bound on nesting, no prototype keys, an object, the exact id.
 */
export function parseJsonObject(raw: Buffer): JsonObject {
  // Decoding would silently turn invalid bytes into U+FFFD, and store them as such.
  if (!isUtf8(raw)) throw malformed('body is not valid UTF-8')
  const text = raw.toString('utf8')
  if (text.trim() === '') throw malformed('body must be a JSON object, got an empty body')
  if (nestedTooDeeply(text)) {
    throw malformed(`body is nested too deeply: at most ${MAX_NESTING} levels of arrays and objects`)
  }
  let body: unknown
  try {
    body = secureJson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' })
  } catch (error) {
    // Valid JSON, so not MALFORMED_JSON: a rule on keys, the only unknown properties not ignored.
    if (error instanceof SyntaxError && /prototype/i.test(error.message)) {
      const rule = 'must not contain "__proto__" or "constructor.prototype" keys'
      throw new ApiError('VALIDATION_FAILED', `body ${rule}`, { details: [{ field: 'body', rule }] })
    }
    if (error instanceof RangeError) throw malformed('body is nested too deeply')
    throw malformed(`body is not valid JSON: ${describeJsonSyntaxError(text)}`)
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw malformed(
      `body must be a JSON object, got ${body === null ? 'null' : Array.isArray(body) ? 'an array' : typeof body}`,
    )
  }
  const object = body as JsonObject
  const id = object.id
  if (id === Infinity || id === -Infinity) {
    // A literal past the doubles' range (1e400) is an integer, only out of int64's: validation
    // would call Infinity "not an integer". The largest double stands in; bodyId reads the literal.
    object.id = Math.sign(id) * Number.MAX_VALUE
    object[exactIdLiteral] = topLevelMemberLiteral(text, 'id')
  } else if (
    typeof id === 'number' &&
    Number.isInteger(id) &&
    (!Number.isSafeInteger(id) || FRACTION_OR_EXPONENT.test(text))
  ) {
    object[exactIdLiteral] = topLevelMemberLiteral(text, 'id')
  }
  return object
}

/**
 * A JSON number without a `.` or an exponent is a plain integer, which JSON.parse reads exactly
 * up to 2^53. Matching anywhere in the body (a name with a dot, say) only costs the read-back.
 */
const FRACTION_OR_EXPONENT = /\.|\d[eE]/

/** Whether arrays and objects nest deeper than MAX_NESTING, brackets inside strings aside. */
function nestedTooDeeply(text: string): boolean {
  // Each level takes at least two characters.
  if (text.length <= 2 * MAX_NESTING) return false
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c)
        i++ // a backslash escapes the next character
      else if (c === 0x22) inString = false
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_NESTING) return true
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return false
}
