/**
 * What POST /plants does with a body, as functions: the route calls them, and so does
 * `plant-store import` for each line, so that both take exactly the same plants.
 */
import { ApiError } from '../errors.js'
import { type AjvError, validationError } from '../http/error-handler.js'
import { type exactIdLiteral, parseJsonObject } from '../http/json-body.js'
import { createBodyAjv } from '../http/validators.js'
import { type NewPlantBody, plantFields, plantFieldWords } from '../schemas/plant.js'
import { sharedSchemas } from '../schemas/shared.js'
import { differingFields, plantOf } from '../storage/plant-fields.js'
import type { Plant } from '../storage/storage.js'
import { bodyId } from './plant-ids.js'
import { checkText } from './plant-text.js'

/** The plant a schema-valid NewPlant body stands for; the checks Ajv cannot make are made here. */
export function plantFromBody(body: NewPlantBody & { [exactIdLiteral]?: string }): Plant {
  for (const { name } of plantFields)
    checkText((body as Record<string, unknown>)[name] as string | undefined, name)
  return plantOf(bodyId(body), body)
}

/** The 409 for a create whose id holds another plant, naming the fields that differ. */
export function plantConflict(plant: Plant, existing: Plant): ApiError {
  const fields = differingFields(existing, plant)
  return new ApiError(
    'PLANT_CONFLICT',
    `id ${plant.id} already belongs to a plant with a different ${fields.join(' and ')}; ` +
      `resend the same ${plantFieldWords('and')}, or use another id`,
    { details: fields.map((field) => ({ field, rule: 'differs from the stored plant with this id' })) },
  )
}

/**
 * A checker of JSON object texts with the route's parser, schema (NewPlant, by the same Ajv
 * options) and rules; it throws the ApiError the route would answer with.
 */
export function newPlantChecker(): (raw: Buffer) => Plant {
  const validate = createBodyAjv(sharedSchemas).getSchema('NewPlant')
  if (!validate) throw new Error('the NewPlant schema is not registered')
  return (raw) => {
    const body = parseJsonObject(raw)
    if (!validate(body)) throw validationError((validate.errors ?? []) as AjvError[], 'body')
    return plantFromBody(body as NewPlantBody)
  }
}
