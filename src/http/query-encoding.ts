import type { preParsingHookHandler } from 'fastify'
import { ApiError } from '../errors.js'

/**
 * A preParsing hook: a query string with bad percent-encoding is a 400 on every route, as it is in
 * the path (the router refuses that one, see frameworkErrors in app.ts). Fastify's query parser
 * keeps such text as is, so `tag=%ff` matched a tag spelt "%ff". It runs after authentication:
 * a request without a valid token hears 401 first, as for any other bad input.
 * decodeURIComponent throws on a `%` without two hex digits and on bytes that are not UTF-8 (an
 * encoded lone surrogate included).
 */
export const rejectBadQueryEncoding: preParsingHookHandler = (request, _reply, payload, done) => {
  const { url } = request
  const question = url.indexOf('?')
  if (question === -1 || !url.includes('%', question)) return done(null, payload)
  const query = url.slice(question + 1)
  if (decodes(query)) return done(null, payload)
  done(badEncoding(query))
}

function decodes(text: string): boolean {
  try {
    decodeURIComponent(text)
    return true
  } catch {
    return false
  }
}

/** The 400, naming the first parameter whose name or value does not decode. */
function badEncoding(query: string): ApiError {
  const pair = query.split('&').find((part) => !decodes(part)) ?? query
  const rawName = pair.split('=')[0] ?? ''
  const name = decodes(rawName) ? decodeURIComponent(rawName) : rawName
  const field = name.length > 100 ? `${name.slice(0, 100)}...` : name
  const rule = 'must be valid percent-encoded UTF-8'
  return new ApiError(
    'VALIDATION_FAILED',
    `query parameter ${field} has bad percent-encoding: each % needs two hex digits, and the bytes must be UTF-8`,
    { details: [{ field, rule }] },
  )
}
