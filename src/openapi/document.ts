import swagger from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import { errorCatalog } from '../errors.js'
import { errorExamples, errorResponses } from '../schemas/error.js'
import { newPlantWebhook, webhookSignatureScheme } from './webhook-doc.js'

/**
 * What the seed leaves "not shown" and how this service decides it. docs/api.md carries the same
 * list; both are read by people choosing whether to trust the service.
 */
const decisions = `
Decisions where the seed description says "not shown":

- **Tokens**: opaque bearer tokens \`pst_\` + 43 base62 characters, issued and revoked by an operator
  with \`plant-store tokens\`; only their SHA-256 is stored. Scopes \`plants:read\` and \`plants:write\`,
  and \`metrics:read\` for \`GET /metrics\` alone; optional expiry. A revocation takes effect within 1 second on every instance. The scheme name is
  case-insensitive. A token is taken only from one Authorization header: an \`access_token\` query
  parameter on a \`/plants\` operation is a 400 (\`invalid_request\`), and so are two Authorization (or
  Host, or Content-Type) lines.
- **Limits**: \`name\` 1 to 200 characters, \`tag\` 1 to 100 characters (Unicode code points), any \`tag\` value allowed,
  both well-formed Unicode without NUL, bodies up to 16 KiB by default (BODY_LIMIT), valid UTF-8,
  with arrays and objects nested at most 64 levels deep.
- **Identity**: \`id\` is unique and is any int64, kept exact end to end (never rounded through a
  double). A fraction is a 400 even where a double would round it to a whole number
  (\`300000.00000000001\`); a whole number written with a fraction or exponent (\`42.0\`, \`4.2e1\`) is
  that integer. \`name\` is not unique. Unknown body properties are accepted, ignored and never stored,
  except \`__proto__\` and \`constructor.prototype\` keys (at any depth), which are a 400. A member
  written twice counts once, the last one, as in JSON.parse.
- **Replays**: the same id with the same name and tag answers 200 again and stores nothing; with
  another name or tag (adding or removing a tag included) it answers 409.
- **The create answer** is exactly the seed's Plant: \`{name, tag}\`, \`tag\` omitted when absent, no \`id\`.
- **Content types**: requests must be \`application/json\` (\`charset=utf-8\` is fine); anything else,
  none, or a \`Content-Encoding\` other than \`identity\` is a 415.
- **Errors**: \`error\` holds the HTTP status; \`message\` names the field and the rule; \`code\` is a stable
  catalog code (${Object.keys(errorCatalog).join(', ')}); \`details\` lists each field at fault.
  A 500 carries no internals (its request id is in the log line).
  Statuses beyond the seed's 400: 401, 403, 404, 405, 409, 413, 415, 417, 429 (rate limits, docs/limits.md), 500, 503; and, before any route
  and followed by closing the connection, 408 (headers or body too slow), 414 (a request line over 16 KiB),
  431 (request line and headers over 16 KiB together), 501 (a CONNECT to anything but a known path, where it is a 405: the service is no proxy;
  or a Transfer-Encoding other than chunked alone) and 505 (a request line naming an HTTP version other than 1.1 or 1.0).
  \`/plants/\` (an empty id) is no route: a 404 whatever the method.
  Authentication is checked before the body is read: a bad token with a bad body is a 401, and an
  \`Expect: 100-continue\` is answered with 100 only once nothing but the body can refuse the request;
  another expectation is a 417. A query string with bad percent-encoding is a 400 on every known route.
- **Durability**: a 200 (or 204) on a write is sent only after its commit is on disk (on SQLite with
  \`SQLITE_SYNC=normal\`, after it survives a crash of the process). A 400, 401, 403, 409, 413 or 415
  stores nothing. A 503 on a write, on either store, means not acknowledged: it may or may not be
  stored, and retrying is safe (creates are idempotent by id; a retried delete answers 404 if the
  first one happened). After a failed sync the SQLite store takes no more writes until the process
  restarts: /readyz answers 503 meanwhile, and under \`--workers\` the worker exits and is replaced.
- **Pipelining**: requests pipelined on one HTTP/1.1 connection are handled one after the other, in
  the order sent, and answered in that order.
- **Read, list, delete and webhooks** come from the fuller public sample this seed was trimmed from.
`

/** request-logging.ts: a caller's value is kept when it is this plain, else replaced, never refused. */
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

/**
 * What route schemas cannot say one operation at a time: every answer carries X-Request-Id, and
 * every body its example.
 */
function addCommonParts<T extends Document>(document: T): T {
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item)) {
      operation.parameters = [...(operation.parameters ?? []), requestIdParameter]
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
        description: `A sample API that uses a plant store as an example to demonstrate features in the OpenAPI specification.\n${decisions}`,
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
        { name: 'webhooks', description: 'What the service sends to subscribers.' },
      ],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'An opaque token `pst_...` issued by an operator with `plant-store tokens create`.',
          },
          webhookSignature: webhookSignatureScheme,
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
