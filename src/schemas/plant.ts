import type { FromSchema } from 'json-schema-to-ts'

/*
 * Plain JSON Schema literals, with types derived from them at compile time only. A runtime schema
 * builder (TypeBox: its ESM build is 709 modules) made start to ready take ~1,000 ms instead of
 * ~600 ms.
 */

/** The seed's Plant: what a create answers. No `id`, exactly as the seed describes it. */
export const Plant = {
  type: 'object',
  required: ['name'],
  properties: {
    name: { type: 'string', description: 'The name of the plant', minLength: 1, maxLength: 200 },
    tag: { type: 'string', description: 'Tag that specifies the type', minLength: 1, maxLength: 100 },
  },
  $id: 'Plant',
} as const

/**
 * The seed's NewPlant, built as the seed builds it: Plant (by reference) plus a required `id`.
 * Unknown properties are allowed and ignored.
 */
export const NewPlant = {
  allOf: [
    { $ref: 'Plant' },
    {
      type: 'object',
      required: ['id'],
      properties: {
        id: {
          type: 'integer',
          description:
            'Identification number of the plant. Any int64; sent and answered as a JSON number with every digit kept.',
          // No minimum/maximum: JSON numbers print them as doubles (9223372036854776000), which would
          // misstate the range; int64.ts enforces it exactly.
          format: 'int64',
        },
      },
    },
  ],
  $id: 'NewPlant',
  description:
    'Plant plus its id. Properties other than id, name and tag are accepted, ignored and never stored, ' +
    'except `__proto__` and `constructor.prototype` keys at any depth, which are a 400 (VALIDATION_FAILED): ' +
    'they are how prototype pollution travels. Of a member written twice, the last counts, as in JSON.parse.',
} as const

export type NewPlantBody = FromSchema<typeof NewPlant, { references: [typeof Plant] }>

/** A plant id in a path or a read answer (a create's body describes its id at more length). */
const plantId = { type: 'integer', format: 'int64', description: 'Identification number of the plant' }

/** A stored plant as read back: the Plant fields plus its id. */
export const StoredPlant = {
  type: 'object',
  required: ['id', 'name'],
  properties: {
    id: plantId,
    name: { type: 'string', description: 'The name of the plant' },
    tag: { type: 'string', description: 'Tag that specifies the type' },
  },
  $id: 'StoredPlant',
}

export const PlantList = { type: 'array', items: { $ref: 'StoredPlant' }, $id: 'PlantList' }

export const PlantIdParams = {
  type: 'object',
  required: ['id'],
  properties: { id: plantId },
}
