#!/usr/bin/env node
// A second yardstick, run only with `bench/run.mjs --reference`: the baseline's routes (see
// baseline.mjs) on Fastify with JSON-schema validation of the body, and nothing else (no store, no
// logging, no token lookup). The issue measured this kind of server at 0.75x to 1.1x of the bare
// baseline; measured in the same run as the service, it shows how much of the service's distance
// to the baseline is the framework itself and how much is the service's own work.
//
// Environment: PORT, HOST (default 127.0.0.1), BENCH_TOKEN (required).
import Fastify from 'fastify'
import { PLANTS, yardstickSettings } from './lib/yardstick.mjs'

const { port, host, expected } = yardstickSettings('fastify-reference')

const app = Fastify({ logger: false })

app.addHook('onRequest', (request, reply, done) => {
  if (request.url === '/healthz' || request.headers.authorization === expected) return done()
  reply.code(401).send({ code: 'UNAUTHENTICATED' })
})

app.get('/healthz', async () => ({ status: 'ok' }))

app.post(
  '/plants',
  {
    schema: {
      body: {
        type: 'object',
        required: ['id', 'name'],
        properties: { id: { type: 'integer' }, name: { type: 'string' }, tag: { type: 'string' } },
      },
      response: {
        200: {
          type: 'object',
          required: ['name'],
          properties: { name: { type: 'string' }, tag: { type: 'string' } },
        },
      },
    },
  },
  async (request) => ({ name: request.body.name, tag: request.body.tag }),
)

app.get(
  '/plants',
  {
    schema: {
      querystring: { type: 'object', properties: { limit: { type: 'integer', minimum: 1, maximum: 1000 } } },
    },
  },
  (request, reply) => {
    reply.type('application/json; charset=utf-8')
    return JSON.stringify(PLANTS.slice(0, request.query.limit ?? 100))
  },
)

app.get('/plants/:id', (request, reply) => {
  const { id } = request.params
  if (!/^-?\d{1,19}$/.test(id)) return reply.code(404).send({ code: 'NOT_FOUND' })
  // The id is echoed as text, as the baseline does, so every int64 keeps its digits.
  reply.type('application/json; charset=utf-8')
  return `{"id":${id},"name":${JSON.stringify('bench plant')},"tag":"bench"}`
})

await app.listen({ port, host })

for (const signal of ['SIGINT', 'SIGTERM'])
  process.once(signal, () => app.close().then(() => process.exit(0)))
