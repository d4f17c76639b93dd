import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { after, before, describe, it } from 'node:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import { Ajv } from 'ajv'
import { errorCatalog } from '../../src/errors.js'
import { sharedSchemas } from '../../src/schemas/shared.js'
import { projectRoot, startService, type TestService } from '../helpers.js'
import { request } from '../http-client.js'

describe('GET /openapi.json', () => {
  let service: TestService
  let doc: any
  before(async () => {
    service = await startService('sqlite')
    const response = await request('GET', `${service.url}/openapi.json`)
    assert.equal(response.status, 200)
    doc = response.json
  })
  after(() => service.close())

  it('validates as OpenAPI 3.1 with a maintained validator', async () => {
    const validator = new Validator()
    const result = await validator.validate(structuredClone(doc))
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2))
    assert.equal(validator.version, '3.1')
  })

  it('carries the seed title, version and MIT license', () => {
    assert.equal(doc.openapi, '3.1.0')
    assert.equal(doc.info.title, 'OpenAPI Plant Store')
    assert.equal(doc.info.version, '1.0.0')
    assert.equal(doc.info.license.name, 'MIT')
  })

  it('opens with a short introduction to Plant Store that points to docs/api.md for the rules', () => {
    const { description } = doc.info
    assert.match(description, /^Plant Store keeps plants/)
    assert.match(description, /Ids are exact 64-bit integers/)
    assert.match(description, /`docs\/api\.md`/)
    // The seed's tagline and the list of decisions live in docs/api.md, not before the first operation.
    assert.doesNotMatch(description, /sample API|Decisions where/)
    assert.ok(description.length < 1000, `${description.length} characters`)
  })

  it('declares bearerAuth and applies it to every /plants operation and /metrics', () => {
    const { type, scheme } = doc.components.securitySchemes.bearerAuth
    assert.deepEqual({ type, scheme }, { type: 'http', scheme: 'bearer' })
    for (const [path, item] of Object.entries(doc.paths) as [
      string,
      Record<string, { security?: unknown }>,
    ][]) {
      for (const operation of Object.values(item)) {
        if (path.startsWith('/plants') || path === '/metrics')
          assert.deepEqual(operation.security, [{ bearerAuth: [] }], path)
        else assert.deepEqual(operation.security, [], path)
      }
    }
  })

  it('declares no scheme but bearerAuth, so Authorize on /docs asks for nothing else', () => {
    assert.deepEqual(Object.keys(doc.components.securitySchemes), ['bearerAuth'])
    // The webhook's signature is documented where a subscriber reads it: its headers.
    const webhook = doc.webhooks.newPlant.post
    assert.deepEqual(webhook.security, [])
    const signature = webhook.parameters.find((p: any) => p.name === 'webhook-signature')
    assert.deepEqual([signature.in, signature.required], ['header', true])
    assert.match(signature.description, /HMAC-SHA256/)
    assert.match(webhook.description, /whsec_/)
  })

  it('gives no parameter an example that "Try it out" on /docs would fill in', () => {
    const parameters = Object.values(doc.paths).flatMap((item: any) =>
      Object.values(item).flatMap((operation: any) => operation.parameters ?? []),
    ) as any[]
    assert.ok(parameters.length >= 10, `expected every parameter, saw ${parameters.length}`)
    for (const parameter of parameters) {
      assert.equal(parameter.example, undefined, parameter.name)
      assert.equal(parameter.examples, undefined, parameter.name)
    }
    // The examples stay, on the schemas, for readers of the document.
    const after = doc.paths['/plants'].get.parameters.find((p: any) => p.name === 'after')
    assert.deepEqual(after.schema.examples, [10])
  })

  it('answers HEAD for every GET without listing it as an operation of its own', async () => {
    for (const path of ['/plants', '/plants/{id}', '/openapi.json', '/healthz', '/readyz']) {
      assert.ok(doc.paths[path].get, path)
      assert.equal(doc.paths[path].head, undefined, path)
    }
    const head = await request('HEAD', `${service.url}/healthz`)
    assert.equal(head.status, 200)
    assert.equal(head.text, '')
  })

  it('declares a relative server, tags, and a summary and description on every operation', () => {
    assert.deepEqual(
      doc.servers.map((server: { url: string }) => server.url),
      ['/'],
    )
    const declaredTags = doc.tags.map((tag: { name: string }) => tag.name)
    const operations = Object.values(doc.paths).flatMap((item: any) => Object.values(item)) as any[]
    const webhook = doc.webhooks.newPlant.post
    // The four plant operations, the document, two probes and the metrics; and the webhook.
    assert.equal(operations.length, 8)
    for (const operation of [...operations, webhook]) {
      assert.ok(operation.summary?.length > 0, operation.operationId)
      assert.ok(operation.description?.length > 0, operation.operationId)
    }
    for (const operation of operations) {
      assert.ok(operation.tags.length > 0, operation.operationId)
      for (const tag of operation.tags)
        assert.ok(declaredTags.includes(tag), `${operation.operationId} ${tag}`)
    }
    // Every declared tag heads operations: Swagger UI shows the webhook in its own section, so a
    // "webhooks" tag stood empty above it.
    for (const tag of declaredTags)
      assert.ok(
        operations.some((operation) => operation.tags.includes(tag)),
        `tag ${tag} has no operation`,
      )
    assert.equal(webhook.tags, undefined)
  })

  it('gives every request and response body an example that its schema accepts', () => {
    const ajv = new Ajv({ strict: false, validateFormats: false })
    for (const [name, schema] of Object.entries(doc.components.schemas) as [string, object][]) {
      ajv.addSchema({ ...schema, $id: `#/components/schemas/${name}` }, `#/components/schemas/${name}`)
    }
    const bodies: [string, any][] = []
    const collect = (where: string, operation: any) => {
      for (const media of Object.values(operation.requestBody?.content ?? {}))
        bodies.push([`${where} body`, media])
      for (const [status, response] of Object.entries(operation.responses) as [string, any][])
        for (const media of Object.values(response.content ?? {})) bodies.push([`${where} ${status}`, media])
    }
    for (const [path, item] of Object.entries(doc.paths) as [string, Record<string, any>][])
      for (const [method, operation] of Object.entries(item)) collect(`${method} ${path}`, operation)
    collect('webhook newPlant', doc.webhooks.newPlant.post)
    assert.ok(bodies.length >= 30, `expected every body, saw ${bodies.length}`)
    for (const [where, media] of bodies) {
      assert.notEqual(media.example, undefined, `${where} has no example`)
      const validate = ajv.compile(media.schema)
      assert.equal(validate(media.example), true, `${where}: ${ajv.errorsText(validate.errors)}`)
      if (media.schema.$ref === '#/components/schemas/Error')
        assert.equal(media.example.error, Number(where.split(' ').at(-1)), where)
    }
  })

  it('says on every id that ids are exact int64 and must not go through JSON.parse', () => {
    const ids = [
      doc.components.schemas.NewPlant.allOf[1].properties.id,
      doc.components.schemas.StoredPlant.properties.id,
      doc.paths['/plants/{id}'].get.parameters.find((p: any) => p.name === 'id'),
    ]
    for (const id of ids) {
      assert.match(id.description, /exact 64-bit integers/)
      assert.match(id.description, /must not parse them with JSON\.parse/)
    }
  })

  // `doc` is the served document, fetched in before(): a second fetch here reused a connection
  // idle through the CPU-bound tests above, which a starved run held past the keep-alive close.
  it('serves the document the linters pass, as written by dump-openapi', () => {
    const dumped = readFileSync(path.join(projectRoot, 'dist/openapi.json'), 'utf8')
    assert.deepEqual(JSON.parse(dumped), doc)
  })

  it('declares X-Request-Id on every answer and the challenge on 401 and 403', () => {
    for (const [path, item] of Object.entries(doc.paths) as [string, Record<string, any>][]) {
      for (const [method, operation] of Object.entries(item)) {
        const where = `${method} ${path}`
        assert.ok(
          operation.parameters.some((p: any) => p.in === 'header' && p.name === 'X-Request-Id'),
          where,
        )
        for (const [status, response] of Object.entries(operation.responses) as [string, any][]) {
          assert.ok(response.headers['X-Request-Id'], `${where} ${status}`)
          if (status === '401' || status === '403') assert.ok(response.headers['WWW-Authenticate'], where)
        }
      }
    }
  })

  it('declares that any 2xx from a webhook subscriber acknowledges a delivery', () => {
    const { responses } = doc.webhooks.newPlant.post
    assert.deepEqual(Object.keys(responses), ['2XX'])
  })

  it('keeps Plant, NewPlant and Error faithful to the seed', () => {
    const { Plant, NewPlant, Error: ErrorSchema } = doc.components.schemas
    assert.deepEqual(Plant.required, ['name'])
    assert.deepEqual(Object.keys(Plant.properties).sort(), ['name', 'tag'])
    // As the seed builds it: every field of Plant (by reference), plus a required int64 id.
    const [plantPart, idPart, ...more] = NewPlant.allOf
    assert.deepEqual(more, [])
    assert.deepEqual(plantPart, { $ref: '#/components/schemas/Plant' })
    assert.deepEqual(idPart.required, ['id'])
    assert.deepEqual(Object.keys(idPart.properties), ['id'])
    assert.equal(idPart.properties.id.type, 'integer')
    assert.equal(idPart.properties.id.format, 'int64')
    for (const part of [NewPlant, idPart, Plant])
      assert.equal(part.additionalProperties, undefined, 'unknown properties stay allowed, as in the seed')
    assert.deepEqual(ErrorSchema.required.sort(), ['error', 'message'])
    assert.equal(ErrorSchema.properties.error.format, 'int32')
    assert.deepEqual(ErrorSchema.properties.code.enum.sort(), Object.keys(errorCatalog).sort())
  })

  it('answers create with the Plant schema and no id', () => {
    const created = doc.paths['/plants'].post.responses['200']
    assert.equal(created.description, 'plant response')
    assert.equal(created.content['application/json'].schema.$ref, '#/components/schemas/Plant')
    assert.equal(
      doc.paths['/plants'].post.requestBody.content['application/json'].schema.$ref,
      '#/components/schemas/NewPlant',
    )
  })

  it('declares every error status of every operation with the Error schema', () => {
    for (const item of Object.values(doc.paths) as Record<string, { responses: Record<string, unknown> }>[]) {
      for (const operation of Object.values(item)) {
        for (const [status, response] of Object.entries(operation.responses) as [
          string,
          { content?: Record<string, { schema: { $ref?: string } }> },
        ][]) {
          if (Number(status) < 400) continue
          assert.equal(
            response.content?.['application/json']?.schema.$ref,
            '#/components/schemas/Error',
            status,
          )
        }
      }
    }
  })

  // The service's Ajv does not check schemas against the meta-schema at start (validators.ts);
  // this does, for the shared schemas as declared and for every schema an operation uses.
  it('has only schemas that are valid under the meta-schema the validators use', () => {
    const ajv = new Ajv({ strict: false })
    const check = (where: string, schema: unknown) =>
      assert.equal(ajv.validateSchema(schema as object), true, `${where}: ${ajv.errorsText()}`)
    for (const schema of sharedSchemas) check(`shared ${schema.$id}`, schema)
    let operations = 0
    for (const [path, item] of Object.entries(doc.paths) as [string, Record<string, any>][]) {
      for (const [method, operation] of Object.entries(item)) {
        operations++
        for (const parameter of operation.parameters ?? []) {
          check(`${method} ${path} ${parameter.in} ${parameter.name}`, parameter.schema)
        }
        for (const media of Object.values(operation.requestBody?.content ?? {}) as { schema: unknown }[]) {
          check(`${method} ${path} body`, media.schema)
        }
        for (const [status, response] of Object.entries(operation.responses) as [string, any][]) {
          for (const media of Object.values(response.content ?? {}) as { schema: unknown }[]) {
            check(`${method} ${path} ${status}`, media.schema)
          }
        }
      }
    }
    assert.ok(operations >= 6, `expected every operation, saw ${operations}`)
    // The check itself must be able to fail.
    assert.equal(ajv.validateSchema({ type: 'integr' }), false)
  })
})
