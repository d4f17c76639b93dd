import type { components, operations } from './generated/openapi.js'

type Schemas = components['schemas']

/** A plant as a create answers it: the seed's Plant, no id. */
export type Plant = Schemas['Plant']

/** A plant to create. The generated type says `number` for the id; here it is exact. */
export type NewPlant = Omit<Schemas['StoredPlant'], 'id'> & { id: bigint }

/** A stored plant as read back, its id exact. */
export type StoredPlant = Omit<Schemas['StoredPlant'], 'id'> & { id: bigint }

/** The stable codes of the service's error catalog. */
export type ErrorCode = NonNullable<Schemas['Error']['code']>

/** One field at fault in an error answer. */
export type ErrorDetail = NonNullable<Schemas['Error']['details']>[number]

/** Filters and page size of one list call; `after` is an exact id. */
export type ListOptions = Omit<NonNullable<operations['listPlants']['parameters']['query']>, 'after'> & {
  after?: bigint
}

/** One page of plants and, when more remain, the URL of the next page (from `Link: rel="next"`). */
export interface PlantPage {
  plants: StoredPlant[]
  next: string | undefined
}

/** Per-call options. */
export interface CallOptions {
  /** Aborts the call, retries and waits included. */
  signal?: AbortSignal
  /** Overrides the client's timeout for this call, retries and waits included. */
  timeoutMs?: number
}
