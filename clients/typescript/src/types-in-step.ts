// Compile-time only: the build fails when a named public type drifts from the generated types of
// the served document (ids aside: bigint in the client, `number` in the generated file).
import type { components, operations } from './generated/openapi.js'
import type { ErrorDetail, ListOptions, NewPlant, Plant, StoredPlant } from './types.js'

type Schemas = components['schemas']
/** The generated type with its int64 members as bigint, as the client exposes them. */
type WithBigintIds<T> = { [K in keyof T]: K extends 'id' | 'after' ? bigint : T[K] }
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
type Assert<T extends true> = T

export type InStep = [
  Assert<Same<Plant, WithBigintIds<Schemas['Plant']>>>,
  Assert<Same<NewPlant, WithBigintIds<Schemas['NewPlant']>>>,
  Assert<Same<StoredPlant, WithBigintIds<Schemas['StoredPlant']>>>,
  Assert<Same<ErrorDetail, WithBigintIds<NonNullable<Schemas['Error']['details']>[number]>>>,
  Assert<Same<ListOptions, WithBigintIds<NonNullable<operations['listPlants']['parameters']['query']>>>>,
]
