import type { components } from './generated/openapi.js'

type Schemas = components['schemas']

/*
 * The public types are named interfaces, so an editor shows `Plant` or `StoredPlant` rather than
 * the generated shape they come from. `InStep` below fails the build when one drifts from the
 * document's generated types (ids aside: bigint here, `number` there).
 */

/** A plant as a create answers it: the seed's Plant, no id. */
export interface Plant {
  /** The name of the plant. */
  name: string
  /** Tag that specifies the type. */
  tag?: string
}

/** A plant to create: its exact int64 id, a name and an optional tag. */
export interface NewPlant {
  /** Any int64, exact: `9007199254740993n`. */
  id: bigint
  /** The name of the plant. */
  name: string
  /** Tag that specifies the type. */
  tag?: string
}

/** A stored plant as read back, its id exact. */
export interface StoredPlant {
  /** Any int64, exact. */
  id: bigint
  /** The name of the plant. */
  name: string
  /** Tag that specifies the type. */
  tag?: string
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
