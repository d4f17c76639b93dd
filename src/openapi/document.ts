import swagger from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { errorExamples, errorResponses } from '../schemas/error.js'
import { fieldWords, plantFields } from '../schemas/plant.js'
import { newPlantWebhook } from './webhook-doc.js'

/** The plant's fields, as the introduction names them. */
const plantInWords = fieldWords(
  [
    'an int64 `id`',
    ...plantFields.map(({ name, required }) => `${required ? 'a' : 'an optional'} \`${name}\``),
  ],
  'and',
)

/**
 * The page's and a generator's first words: what the service is and the one thing a client must
 * get right. The rules behind every answer live in docs/api.md, which this points to.
 */
const introduction = [
  `Plant Store keeps plants (${plantInWords}) in SQLite or PostgreSQL, ` +
    'behind bearer tokens, and sends a signed webhook for every new plant.',
  '**Ids are exact 64-bit integers**, sent and answered as JSON numbers with every digit: read them with a ' +
    'BigInt-aware JSON parser or `@plant-store/client`, never with `JSON.parse`, which reads ' +
    '9007199254740993 as 9007199254740992.',
  'To try an operation on the reference page (`GET /docs`), press **Authorize** and paste a token ' +
    '(`plant-store tokens create --scopes plants:read,plants:write`). What the service decides where its seed description says "not shown" ' +
    '(token format, limits, ids, errors, durability) is written out in `docs/api.md` of the Plant Store source.',
].join('\n\n')

/** observability/request-line.ts: a caller's value is kept when it is this plain, else replaced, never refused. */
const requestIdParameter = {
  in: 'header',
  name: 'X-Request-Id',
  required: false,
  description:
    'Correlates the request with its log line and is echoed in the answer. A value that does not match ' +
    'the pattern is replaced by a generated UUID, not refused.',
  schema: { type: 'string', pattern: '^[A-Za-z0-9._:-]{1,128}$' },
}

const requestIdHeader = {
  'X-Request-Id': {
    description: "The request's X-Request-Id if it sent a plain one, else a generated UUID.",
    schema: { type: 'string' },
  },
}

type Media = { schema?: { $ref?: string }; example?: unknown }
type Content = Record<string, Media>
type Operation = {
  operationId?: string
  parameters?: unknown[]
  requestBody?: { content?: Content }
  responses?: Record<string, { headers?: Record<string, unknown>; content?: Content }>
}
type Document = {
  paths?: Record<string, Record<string, Operation>>
  components?: { schemas?: Record<string, { examples?: unknown[] }> }
}

/**
 * Gives each body its example: an error answer the example of its status, any other the first
 * example of the component it names. @fastify/swagger drops the siblings of a route's `$ref`, so
 * the examples live on the components (schemas/) and are copied here.
 */
function addExamples(document: Document, content: Content | undefined, status?: string): void {
  for (const media of Object.values(content ?? {})) {
    const name = media.schema?.$ref?.replace('#/components/schemas/', '')
    if (name === undefined || media.example !== undefined) continue
    const example =
      name === 'Error' ? errorExamples[Number(status)] : document.components?.schemas?.[name]?.examples?.[0]
    if (example !== undefined) media.example = example
  }
}

type Parameter = { example?: unknown; schema?: { examples?: unknown[] } }

/**
 * Moves a parameter's example into its schema (`examples`, JSON Schema's keyword): Swagger UI
 * fills "Try it out" from a parameter's `example`, and a filled `after=10` silently hid plants.
 */
function examplesInSchema(parameters: unknown[]): void {
  for (const parameter of parameters as Parameter[]) {
    if (parameter.example === undefined || parameter.schema === undefined) continue
    parameter.schema.examples = [parameter.example]
    delete parameter.example
  }
}

/**
 * What route schemas cannot say one operation at a time: every answer carries X-Request-Id, every
 * body its example, and no parameter an example that "Try it out" would fill in.
 */
function addCommonParts<T extends Document>(document: T): T {
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item)) {
      operation.parameters = [...(operation.parameters ?? []), requestIdParameter]
      examplesInSchema(operation.parameters)
      addExamples(document, operation.requestBody?.content)
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        response.headers = { ...response.headers, ...requestIdHeader }
        addExamples(document, response.content, status)
      }
    }
  }
  return document
}

/** Registers @fastify/swagger; routes declared after this appear in the document. */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    // Every GET also answers HEAD (Fastify's exposeHeadRoutes), and the Allow headers say so; the
    // document leaves them out, as HTTP implies them: listed, they doubled a generated client's
    // functions.
    exposeHeadRoutes: false,
    // Only an OpenAPI document is configured, so only an openapiObject ever comes here.
    transformObject: (documentObject) =>
      addCommonParts((documentObject as { openapiObject: never }).openapiObject),
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'OpenAPI Plant Store',
        version: '1.0.0',
        description: introduction,
        license: { name: 'MIT', identifier: 'MIT' },
        contact: { name: 'Plant Store maintainers' },
      },
      // Relative, so the document is right behind any host, port or proxy that serves it.
      servers: [{ url: '/', description: 'The service that serves this document' }],
      tags: [
        { name: 'plants', description: 'Create, read, list and delete plants; a bearer token is needed.' },
        {
          name: 'service',
          description: 'Probes and this document, which need no token; the metrics, which need metrics:read.',
        },
      ],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'An opaque token `pst_...` issued by an operator with `plant-store tokens create`.',
          },
        },
      },
      // The hand-written webhook object is valid OpenAPI 3.1; openapi-types' 3.0 typings do not know it.
      webhooks: newPlantWebhook as never,
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) =>
        typeof json.$id === 'string' ? json.$id : `def-${i}`,
    },
  })
  app.get(
    '/openapi.json',
    {
      schema: {
        operationId: 'openapi',
        tags: ['service'],
        summary: 'This OpenAPI 3.1 document',
        description: 'The document this service serves, ids in its examples printed exactly; needs no token.',
        security: [],
        response: {
          200: {
            type: 'object',
            additionalProperties: true,
            description: 'The document',
            examples: [{ openapi: '3.1.0', info: { title: 'OpenAPI Plant Store', version: '1.0.0' } }],
          },
          ...errorResponses(),
        },
      },
    },
    async () => app.swagger(),
  )
}

/** The served OpenAPI document, built from the routes registered after it. */
export default fp(registerOpenApi, { name: 'openapi', dependencies: ['contract'] })
