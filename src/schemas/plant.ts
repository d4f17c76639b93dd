import { type Static, Type } from 'typebox'

/** The seed's Plant: what a create answers. No `id`, exactly as the seed describes it. */
export const Plant = Type.Object(
  {
    name: Type.String({ description: 'The name of the plant', minLength: 1, maxLength: 200 }),
    tag: Type.Optional(
      Type.String({ description: 'Tag that specifies the type', minLength: 1, maxLength: 100 }),
    ),
  },
  { $id: 'Plant' },
)

/** The seed's NewPlant: every field of Plant plus `id`. Unknown properties are allowed and ignored. */
export const NewPlant = Type.Object(
  {
    id: Type.Integer({
      description:
        'Identification number of the plant. Any int64; sent and answered as a JSON number with every digit kept.',
      // No minimum/maximum: JSON numbers print them as doubles (9223372036854776000), which would
      // misstate the range; int64.ts enforces it exactly.
      format: 'int64',
    }),
    name: Type.String({ description: 'The name of the plant', minLength: 1, maxLength: 200 }),
    tag: Type.Optional(
      Type.String({ description: 'Tag that specifies the type', minLength: 1, maxLength: 100 }),
    ),
  },
  {
    $id: 'NewPlant',
    description:
      'Plant plus its id. Properties other than id, name and tag are accepted, ignored and never stored.',
  },
)

/** A stored plant as read back: the Plant fields plus its id. */
export const StoredPlant = Type.Object(
  {
    id: Type.Integer({ format: 'int64', description: 'Identification number of the plant' }),
    name: Type.String({ description: 'The name of the plant' }),
    tag: Type.Optional(Type.String({ description: 'Tag that specifies the type' })),
  },
  { $id: 'StoredPlant' },
)

export const PlantList = Type.Array(Type.Ref('StoredPlant'), { $id: 'PlantList' })

export const PlantIdParams = Type.Object({
  id: Type.Integer({ format: 'int64', description: 'Identification number of the plant' }),
})

export type NewPlantBody = Static<typeof NewPlant>
