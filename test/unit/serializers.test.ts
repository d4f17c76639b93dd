import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { dedupedSerializers } from '../../src/http/serializers.js'

const ErrorShape = {
  $id: 'Error',
  type: 'object',
  properties: { error: { type: 'integer' }, message: { type: 'string' } },
}
const route = (httpStatus: string, schema: unknown) => ({ method: 'GET', url: '/x', httpStatus, schema })

describe('dedupedSerializers', () => {
  it('compiles a schema once when only its top-level description differs', () => {
    const compiler = dedupedSerializers()({ Error: ErrorShape }, {})
    const notFound = compiler(route('404', { $ref: 'Error', description: 'Not found' }))
    const unavailable = compiler(route('503', { $ref: 'Error', description: 'Store unavailable' }))
    assert.equal(notFound, unavailable)
    // Fastify builds a compiler per route; the cache spans them.
    const otherRoute = dedupedSerializers()
    assert.notEqual(otherRoute({ Error: ErrorShape }, {})(route('404', { $ref: 'Error' })), notFound)
    assert.equal(notFound({ error: 404, message: 'gone', extra: 1 }), '{"error":404,"message":"gone"}')
  })

  it('keeps schemas of different shapes apart, including a property named description', () => {
    const build = dedupedSerializers()
    const compiler = build({}, {})
    const plain = compiler(route('200', { type: 'object', properties: { name: { type: 'string' } } }))
    const described = compiler(
      route('200', {
        type: 'object',
        properties: { name: { type: 'string' }, description: { type: 'string' } },
      }),
    )
    assert.notEqual(plain, described)
    assert.equal(described({ name: 'fern', description: 'green' }), '{"name":"fern","description":"green"}')
    assert.equal(plain({ name: 'fern', description: 'green' }), '{"name":"fern"}')
  })

  it('does not share a serializer across different shared schemas', () => {
    const build = dedupedSerializers()
    const narrow = build({ Error: ErrorShape }, {})(route('400', { $ref: 'Error' }))
    const wider = build(
      { Error: { ...ErrorShape, properties: { ...ErrorShape.properties, code: { type: 'string' } } } },
      {},
    )(route('400', { $ref: 'Error' }))
    assert.notEqual(narrow, wider)
    assert.equal(wider({ error: 400, message: 'bad', code: 'X' }), '{"error":400,"message":"bad","code":"X"}')
  })
})
