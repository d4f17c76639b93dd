import type { FromSchema } from 'json-schema-to-ts'

/*
 * Plain JSON Schema literals, with types derived from them at compile time only. A runtime schema
 * builder (TypeBox: its ESM build is 709 modules) made start to ready take ~1,000 ms instead of
 * ~600 ms.
 */

/**
 * What every id's description says: JSON.parse rounds integers beyond 2^53, so a JavaScript client
 * that uses it reads, and then deletes, the wrong plant.
 */
export const EXACT_ID =
  'Ids are exact 64-bit integers (any int64, -9223372036854775808 to 9223372036854775807), sent and ' +
  'answered as JSON numbers with every digit kept. JavaScript clients must not parse them with JSON.parse, ' +
  'which rounds integers beyond 2^53 (9007199254740993 reads as 9007199254740992): read them losslessly ' +
  '(a BigInt-aware parser, or @plant-store/client).'

/**
 * A plant's fields besides its id, in the order the API writes them: the one place they are
 * declared. The schemas below, the storage's Plant type, both stores' columns and JSON SQL, the
 * projections, the replay comparison and the client (through the served document) follow from it.
 * Each is a string kept in a TEXT column of its own name; a required one is NOT NULL there.
 */
export const plantFieldSchemas = {
  name: { type: 'string', description: 'The name of the plant', minLength: 1, maxLength: 200 },
  tag: { type: 'string', description: 'Tag that specifies the type', minLength: 1, maxLength: 100 },
} as const

/** The fields a plant always has; the others may be absent, never null. */
export const requiredPlantFields = ['name'] as const

type FieldName = keyof typeof plantFieldSchemas

/** The declared fields' values, as a plant holds them (an absent optional field is an absent key). */
export type PlantFieldValues = FromSchema<{
  type: 'object'
  properties: typeof plantFieldSchemas
  required: typeof requiredPlantFields
  additionalProperties: false
}>

/** One declared field, as the projections and the SQL builders walk them. */
export interface PlantField {
  readonly name: string
  readonly required: boolean
}

/** The declaration as a list, in its order. */
export const plantFields: readonly PlantField[] = (Object.keys(plantFieldSchemas) as FieldName[]).map(
  (name) => ({ name, required: (requiredPlantFields as readonly string[]).includes(name) }),
)

/** `a`, `a and b`, `a, b and c`: field names in a sentence. */
export function fieldWords(names: readonly string[], conjunction: 'and' | 'or'): string {
  return names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} ${conjunction} ${names.at(-1)}`
}

/** The field names in a sentence: `name and tag`, `name or tag`. */
export const plantFieldWords = (conjunction: 'and' | 'or', fields: readonly PlantField[] = plantFields) =>
  fieldWords(
    fields.map((field) => field.name),
    conjunction,
  )

/** The seed's Plant: what a create answers. No `id`, exactly as the seed describes it. */
export const Plant = {
  type: 'object',
  required: requiredPlantFields,
  properties: plantFieldSchemas,
  $id: 'Plant',
  examples: [{ name: 'Monstera', tag: 'indoor' }],
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
          description: `Identification number of the plant. ${EXACT_ID}`,
          examples: [10],
          // No minimum/maximum: JSON numbers print them as doubles (9223372036854776000), which would
          // misstate the range; int64.ts enforces it exactly.
          format: 'int64',
        },
      },
    },
  ],
  $id: 'NewPlant',
  examples: [{ id: 10, name: 'Monstera', tag: 'indoor' }],
  description:
    `Plant plus its id. Properties other than ${fieldWords(['id', ...Object.keys(plantFieldSchemas)], 'and')} ` +
    'are accepted, ignored and never stored, ' +
    'except `__proto__` and `constructor.prototype` keys at any depth, which are a 400 (VALIDATION_FAILED): ' +
    'they are how prototype pollution travels. Of a member written twice, the last counts, as in JSON.parse.',
} as const

export type NewPlantBody = FromSchema<typeof NewPlant, { references: [typeof Plant] }>

/** A plant id in a path or a read answer. */
const plantId = {
  type: 'integer',
  format: 'int64',
  description: `Identification number of the plant. ${EXACT_ID}`,
  examples: [10],
}

/** A stored plant as read back: the Plant fields plus its id. */
export const StoredPlant = {
  type: 'object',
  required: ['id', ...requiredPlantFields],
  properties: {
    id: plantId,
    // As declared, less the limits a create checks.
    ...Object.fromEntries(
      Object.entries(plantFieldSchemas).map(([name, { type, description }]) => [name, { type, description }]),
    ),
  },
  $id: 'StoredPlant',
  examples: [{ id: 10, name: 'Monstera', tag: 'indoor' }],
}

export const PlantList = {
  type: 'array',
  items: { $ref: 'StoredPlant' },
  $id: 'PlantList',
  examples: [
    [
      { id: 10, name: 'Monstera', tag: 'indoor' },
      { id: 11, name: 'Maidenhair fern' },
    ],
  ],
}

export const PlantIdParams = {
  type: 'object',
  required: ['id'],
  properties: { id: plantId },
}
