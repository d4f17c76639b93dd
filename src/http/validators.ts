import { Ajv, type ValidateFunction } from 'ajv'
import type { FastifyInstance } from 'fastify'

// OpenAPI's integer formats are documentation; the int64 range is enforced exactly in int64.ts.
const formats = { int64: true, int32: true } as const

/**
 * Options both validators share. `validateSchema: false`: checking our own schemas against the
 * draft-07 meta-schema made each Ajv compile that meta-schema first, about 40 ms of every start
 * per instance. The schemas are constants in this repository, and the OpenAPI test checks every
 * schema of the served document against its meta-schema instead.
 */
const common = {
  useDefaults: true,
  // Every field at fault goes into the Error's details (the message names the first). The
  // schemas have no arrays or patterns, so a hostile body cannot make this costly.
  allErrors: true,
  strict: false,
  strictNumbers: true,
  validateSchema: false,
  formats,
}

/** The validator request bodies are checked with; `plant-store import` checks its lines with it too. */
export function createBodyAjv(sharedSchemas: object[]): Ajv {
  const bodyAjv = new Ajv({ ...common, coerceTypes: false })
  for (const schema of sharedSchemas) bodyAjv.addSchema(schema)
  return bodyAjv
}

/**
 * Two validators. Bodies are checked as sent: no type coercion, so `"id": "5"` or `"name": 5` is a
 * 400, not silently converted. Path and query values are text by nature, so they are coerced, but
 * on a copy: handlers still see the original text and convert ids exactly (a double would round
 * 9007199254740993).
 */
export function installValidators(app: FastifyInstance, sharedSchemas: object[]): void {
  const bodyAjv = createBodyAjv(sharedSchemas)
  const textAjv = new Ajv({ ...common, coerceTypes: 'array' })

  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart === 'body') return bodyAjv.compile(schema)
    const validate: ValidateFunction = textAjv.compile(schema)
    const onCopy = (data: unknown) => {
      const ok = validate(typeof data === 'object' && data !== null ? { ...data } : data)
      onCopy.errors = validate.errors
      return ok
    }
    onCopy.errors = null as ValidateFunction['errors']
    return onCopy
  })
}
