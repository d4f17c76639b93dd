import { SerializerSelector } from '@fastify/fast-json-stringify-compiler'

type SerializerFactory = ReturnType<typeof SerializerSelector>
type Serializer = ReturnType<ReturnType<SerializerFactory>>

/**
 * Fastify's own serializer factory, with each distinct response schema compiled once. Fastify asks
 * for a serializer per route and status, 50 at this writing, and the Error statuses of every route
 * are one schema that differs only in its description. fast-json-stringify compiled each of them
 * again, about 50 ms of every start. A response's top-level `description` is documentation (the
 * OpenAPI response text) and never changes what is written, so the key leaves it out; the shared
 * schemas that a `$ref` resolves against are part of the key.
 */
export function dedupedSerializers(): SerializerFactory {
  const build = SerializerSelector()
  const compiled = new Map<string, Serializer>()
  return (externalSchemas, options) => {
    const compile = build(externalSchemas, options)
    const shared = JSON.stringify(externalSchemas ?? null)
    return (route) => {
      const key = `${shared}\n${JSON.stringify(withoutDescription(route.schema))}`
      let serializer = compiled.get(key)
      if (!serializer) {
        serializer = compile(route)
        compiled.set(key, serializer)
      }
      return serializer
    }
  }
}

function withoutDescription(schema: unknown): unknown {
  if (typeof schema !== 'object' || schema === null || !('description' in schema)) return schema
  const { description: _documentation, ...shape } = schema
  return shape
}
