/**
 * The source text of one member of a JSON object, read without parsing the rest: how the body
 * parser recovers the exact digits of an `id` that JSON.parse has rounded.
 *
 * It walks only the top level and skips nested values by bracket depth, so it must only be given
 * text that JSON.parse has already accepted. It follows JSON.parse in everything that can differ:
 * a byte-order mark before the object is skipped (secure-json-parse strips one), a key written
 * with escapes (`"\u0069d"`) is that key, and of duplicate keys the last one counts. A second,
 * stricter parser (lossless-json, used before) refused bodies JSON.parse accepts: duplicate keys
 * anywhere, a byte-order mark, so a body's fate depended on the size of its id.
 */

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const COMMA = 0x2c
const COLON = 0x3a
const BYTE_ORDER_MARK = 0xfeff

const isJsonSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d

/** The literal text of the last top-level member named `key`, or undefined when there is none. */
export function topLevelMemberLiteral(json: string, key: string): string | undefined {
  let i = skipSpace(json, json.charCodeAt(0) === BYTE_ORDER_MARK ? 1 : 0)
  if (json.charCodeAt(i) !== OPEN_BRACE) return undefined
  i++
  let found: string | undefined
  for (;;) {
    i = skipSpace(json, i)
    if (json.charCodeAt(i) !== QUOTE) return found // `}` of an empty object (or not an object)
    const keyEnd = endOfString(json, i)
    const rawKey = json.slice(i, keyEnd)
    const name = rawKey.includes('\\') ? (JSON.parse(rawKey) as string) : rawKey.slice(1, -1)
    i = skipSpace(json, keyEnd)
    if (json.charCodeAt(i) !== COLON) return found
    const valueStart = skipSpace(json, i + 1)
    const valueEnd = endOfValue(json, valueStart)
    if (name === key) found = json.slice(valueStart, valueEnd)
    i = skipSpace(json, valueEnd)
    if (json.charCodeAt(i) !== COMMA) return found
    i++
  }
}

function skipSpace(json: string, i: number): number {
  while (i < json.length && isJsonSpace(json.charCodeAt(i))) i++
  return i
}

/** Index just past the string that opens at `start` (a quote). */
function endOfString(json: string, start: number): number {
  let i = start + 1
  while (i < json.length) {
    const c = json.charCodeAt(i)
    if (c === BACKSLASH) i += 2
    else if (c === QUOTE) return i + 1
    else i++
  }
  return i
}

/** Index just past the value that starts at `start`: a string, an array or object, or a scalar. */
function endOfValue(json: string, start: number): number {
  const first = json.charCodeAt(start)
  if (first === QUOTE) return endOfString(json, start)
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0
    let i = start
    while (i < json.length) {
      const c = json.charCodeAt(i)
      if (c === QUOTE) {
        i = endOfString(json, i)
        continue
      }
      if (c === OPEN_BRACE || c === OPEN_BRACKET) depth++
      else if ((c === CLOSE_BRACE || c === CLOSE_BRACKET) && --depth === 0) return i + 1
      i++
    }
    return i
  }
  // A number, true, false or null runs until a delimiter.
  let i = start
  while (i < json.length) {
    const c = json.charCodeAt(i)
    if (c === COMMA || c === CLOSE_BRACE || c === CLOSE_BRACKET || isJsonSpace(c)) break
    i++
  }
  return i
}
