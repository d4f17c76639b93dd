import { ApiError } from '../errors.js'
import { exactIdLiteral } from '../http/json-body.js'
import { INT64_MAX, INT64_MIN, integerFromLiteral, isInt64, parseInt64Text } from '../int64.js'

const rangeRule = `must be an integer from ${INT64_MIN} to ${INT64_MAX}`

/** The exact id of a validated NewPlant body (Ajv has already checked it is an integer). */
export function bodyId(body: { id: number; [exactIdLiteral]?: string }): bigint {
  const literal = body[exactIdLiteral]
  // 1e400 parses to Infinity: never let it reach BigInt(), which would throw a 500.
  if (literal === undefined && !Number.isSafeInteger(body.id)) throw invalid('id', rangeRule, 'body')
  const id = literal === undefined ? BigInt(body.id) : integerFromLiteral(literal)
  if (id === undefined) throw invalid('id', 'must be an integer', 'body')
  if (!isInt64(id)) throw invalid('id', rangeRule, 'body')
  return id
}

/** Converts a path or query value that must be an int64, naming `field` when it is not. */
export function textId(text: string, field: string, where: 'path parameter' | 'query parameter'): bigint {
  const id = parseInt64Text(text)
  if (id === undefined) throw invalid(field, `${rangeRule}, written in decimal digits`, where)
  return id
}

function invalid(field: string, rule: string, where: string): ApiError {
  const prefix = where === 'body' ? '' : `${where} `
  return new ApiError('VALIDATION_FAILED', `${prefix}${field} ${rule}`, { details: [{ field, rule }] })
}
