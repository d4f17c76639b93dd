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
  const exponent = Number(exponentText)
  // Far outside int64 either way; avoid building huge strings for 1e999999.
  if (exponent > 40) return /^0*$/.test(whole + fraction) ? 0n : BigInt(`${sign}1${'0'.repeat(41)}`)
  const digits = whole + fraction
  const pointAt = whole.length + exponent
  if (pointAt <= 0) return /^0*$/.test(digits) ? 0n : undefined
  const intPart =
    pointAt >= digits.length ? digits + '0'.repeat(pointAt - digits.length) : digits.slice(0, pointAt)
  const fracPart = pointAt >= digits.length ? '' : digits.slice(pointAt)
  if (!/^0*$/.test(fracPart)) return undefined
  const value = BigInt(intPart)
  return sign === '-' ? -value : value
}

/** Parses a path or query value such as `-42`; undefined unless it is plain decimal digits. */
export function parseInt64Text(text: string): bigint | undefined {
  if (!/^-?\d{1,20}$/.test(text)) return undefined
  const value = BigInt(text)
  return isInt64(value) ? value : undefined
}
