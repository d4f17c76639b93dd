import { type ParseError, ParseErrorCode, parse } from 'jsonc-parser'

/** What each of jsonc-parser's error codes means to someone who wrote the body by hand. */
const RULES: Record<ParseErrorCode, string> = {
  [ParseErrorCode.InvalidSymbol]: 'unexpected character',
  [ParseErrorCode.InvalidNumberFormat]: 'invalid number',
  [ParseErrorCode.PropertyNameExpected]: 'expected a property name in double quotes',
  [ParseErrorCode.ValueExpected]: 'expected a value',
  [ParseErrorCode.ColonExpected]: "expected ':'",
  [ParseErrorCode.CommaExpected]: "expected ','",
  [ParseErrorCode.CloseBraceExpected]: "expected '}'",
  [ParseErrorCode.CloseBracketExpected]: "expected ']'",
  [ParseErrorCode.EndOfFileExpected]: 'unexpected text after the JSON value',
  [ParseErrorCode.InvalidCommentToken]: 'comments are not JSON',
  [ParseErrorCode.UnexpectedEndOfComment]: 'comments are not JSON',
  [ParseErrorCode.UnexpectedEndOfString]: 'unterminated string',
  [ParseErrorCode.UnexpectedEndOfNumber]: 'incomplete number',
  [ParseErrorCode.InvalidUnicode]: 'invalid \\u escape',
  [ParseErrorCode.InvalidEscapeCharacter]: 'invalid escape in a string',
  [ParseErrorCode.InvalidCharacter]: 'control character in a string must be escaped',
}

/**
 * Says what is wrong with text that JSON.parse refused, and where: "expected a value at line 1,
 * column 102". V8's own messages differ between Node lines, and the message is part of the API.
 * Called only after JSON.parse failed, so its cost never touches a valid body.
 */
export function describeJsonSyntaxError(text: string): string {
  const errors: ParseError[] = []
  parse(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false })
  const first = errors[0]
  // Should jsonc-parser ever accept a text JSON.parse refused, there is no position to give.
  if (!first) return 'not a JSON text'
  const before = text.slice(0, first.offset)
  const line = before.split('\n').length
  const column = first.offset - before.lastIndexOf('\n')
  return `${RULES[first.error]} at line ${line}, column ${column}`
}
