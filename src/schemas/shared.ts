import { ErrorBody } from './error.js'
import { NewPlant, Plant, PlantList, StoredPlant } from './plant.js'

/** Schemas referenced by `$ref` from routes; they become the document's components. */
export const sharedSchemas = [Plant, NewPlant, StoredPlant, PlantList, ErrorBody]
