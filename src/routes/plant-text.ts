import { ApiError } from '../errors.js'

const rule = 'must be well-formed Unicode text without NUL characters'

/**
 * Names and tags are stored as UTF-8 text. A lone surrogate would come back as U+FFFD (and turn an
 * exact replay into a 409), and PostgreSQL cannot store U+0000 at all, so both are refused up front
 * on every store alike.
 */
export function checkText(value: string | undefined, field: string, where = ''): void {
  if (value === undefined) return
  if (value.includes('\u0000') || !value.isWellFormed()) {
    throw new ApiError('VALIDATION_FAILED', `${where}${field} ${rule}`, { details: [{ field, rule }] })
  }
}
