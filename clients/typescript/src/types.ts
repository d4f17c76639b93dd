import type { components } from './generated/openapi.js'

type Schemas = components['schemas']
type PlantFields = Schemas['Plant']

/*
 * The public types are named interfaces, so an editor shows `Plant` or `StoredPlant` rather than
 * the generated shape they come from. The plant types extend the generated ones, so their fields
 * (and descriptions) follow the document; only the id is their own, a bigint where the generated
 * type has `number`. `InStep` (types-in-step.ts) fails the build when a type drifts.
 */

/** A plant as a create answers it: the seed's Plant, no id. */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- a named type for hovers, its members generated
export interface Plant extends PlantFields {}

/** A plant to create: its exact int64 id and the Plant fields. */
export interface NewPlant extends PlantFields {
  /** Any int64, exact: `9007199254740993n`. */
  id: bigint
}

/** A stored plant as read back, its id exact. */
export interface StoredPlant extends Omit<Schemas['StoredPlant'], 'id'> {
  /** Any int64, exact. */
  id: bigint
}

/** The stable codes of the service's error catalog. */
export type ErrorCode = NonNullable<Schemas['Error']['code']>

/** One field at fault in an error answer. */
export interface ErrorDetail {
  /** The field, parameter or header at fault. */
  field: string
  /** The rule it broke. */
  rule: string
}

/** Filters and page size of one list call. */
export interface ListOptions {
  /** Page size, 1 to 1000. */
  limit?: number
  /** Keyset cursor, an exact id: only plants with a larger id are listed. */
  after?: bigint
  /** Only plants with exactly this tag. */
  tag?: string
}

/** One page of plants and, when more remain, the URL of the next page (from `Link: rel="next"`). */
export interface PlantPage {
  plants: StoredPlant[]
  next: string | undefined
}

/** Per-call options. */
export interface CallOptions {
  /** Aborts the call, retries and waits included; an `AbortSignal.timeout()` is reported as TIMEOUT. */
  signal?: AbortSignal
  /** Overrides the client's timeout for this call, retries and waits included. */
  timeoutMs?: number
}
