/**
 * int64 handling. JSON.parse and Ajv work on doubles, which round integers beyond 2^53, so every
 * id that crosses the API boundary is turned into a bigint here from its decimal text.
 */
export const INT64_MIN = -(2n ** 63n)
export const INT64_MAX = 2n ** 63n - 1n

export function isInt64(value: bigint): boolean {
  return value >= INT64_MIN && value <= INT64_MAX
}

/**
 * The exact integer a JSON number literal denotes (`12`, `-3`, `1e3`, `9.0`, `2.5e1`), or
 * undefined when the literal has a fractional part.
 */
export function integerFromLiteral(literal: string): bigint | undefined {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(literal)
  if (!match) return undefined
  const [, sign, whole = '', fraction = '', exponentText = '0'] = match
  const digits = whole + fraction
  const significant = digits.replace(/^0+/, '')
  if (significant === '') return 0n
  // Digits before the decimal point, counted from the first significant one: leading zeros
  // (`0.0001e4`) count for nothing, whatever the exponent.
  const pointAt = whole.length + Number(exponentText) - (digits.length - significant.length)
  if (pointAt <= 0) return undefined
  // 21 digits or more is far outside int64; and 1e999999 must not build a million-digit string.
  if (pointAt > 20) return BigInt(`${sign}1${'0'.repeat(20)}`)
  const intPart =
    pointAt >= significant.length
      ? significant + '0'.repeat(pointAt - significant.length)
      : significant.slice(0, pointAt)
  if (!/^0*$/.test(significant.slice(pointAt))) return undefined
  const value = BigInt(intPart)
  return sign === '-' ? -value : value
}

/**
 * Parses a path or query value such as `-42` or `007`; undefined unless it is plain decimal digits
 * within int64. Leading zeros are allowed in any number (the router bounds a path's length).
 */
export function parseInt64Text(text: string): bigint | undefined {
  const match = /^(-?)0*(\d{1,19})$/.exec(text)
  if (!match) return undefined
  const value = BigInt(`${match[1]}${match[2]}`)
  return isInt64(value) ? value : undefined
}
