import { ApiError } from '../errors.js'

/**
 * The 400 for a query string with bad percent-encoding, or undefined when it decodes. Checked on
 * every route, as the path is (the router refuses bad encoding there, see frameworkErrors in
 * app.ts): Fastify's query parser keeps such text as is, so `tag=%ff` matched a tag spelt "%ff".
 * decodeURIComponent throws on a `%` without two hex digits and on bytes that are not UTF-8 (an
 * encoded lone surrogate included).
 */
export function badQueryEncoding(url: string): ApiError | undefined {
  const question = url.indexOf('?')
  if (question === -1 || !url.includes('%', question)) return undefined
  const query = url.slice(question + 1)
  return decodes(query) ? undefined : badEncoding(query)
}

function decodes(text: string): boolean {
  try {
    decodeURIComponent(text)
    return true
  } catch {
    return false
  }
}

const RULE = 'must be valid percent-encoded UTF-8'
const WHY = 'each % needs two hex digits, and the bytes must be UTF-8'

/** The 400, naming the first parameter whose name or value does not decode. */
function badEncoding(query: string): ApiError {
  const pair = query.split('&').find((part) => !decodes(part)) ?? query
  const rawName = pair.split('=')[0] ?? ''
  const name = decodes(rawName) ? decodeURIComponent(rawName) : rawName
  const field = name.length > 100 ? `${name.slice(0, 100)}...` : name
  return new ApiError('VALIDATION_FAILED', `query parameter ${field} has bad percent-encoding: ${WHY}`, {
    details: [{ field, rule: RULE }],
  })
}

/**
 * The 400 for a path the router refused as badly percent-encoded. Under /plants/ the segment is
 * the only path parameter, the plant id, so it is named; elsewhere the path itself is.
 */
export function badPathEncoding(url: string): ApiError {
  const path = url.split('?')[0] ?? url
  const field = /^\/plants\/[^/]*$/.test(path) ? 'id' : 'path'
  const subject = field === 'id' ? 'path parameter id' : 'the path'
  return new ApiError('VALIDATION_FAILED', `${subject} has bad percent-encoding: ${WHY}`, {
    details: [{ field, rule: RULE }],
  })
}
