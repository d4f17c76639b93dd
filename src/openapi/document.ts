import swagger from '@fastify/swagger'
import type { FastifyInstance } from 'fastify'
import { errorCatalog } from '../errors.js'
import { errorResponses } from '../schemas/error.js'
import { newPlantWebhook } from './webhook-doc.js'

/**
 * What the seed leaves "not shown" and how this service decides it. The README carries the same
 * list; both are read by people choosing whether to trust the service.
 */
const decisions = `
Decisions where the seed description says "not shown":

- **Tokens**: opaque bearer tokens \`pst_\` + 43 base62 characters, issued and revoked by an operator
  with \`plant-store tokens\`; only their SHA-256 is stored. Scopes \`plants:read\` and \`plants:write\`;
  optional expiry. A revocation takes effect within 1 second on every instance. The scheme name is
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
- **Durability**: a 200 is sent only after the plant is committed to disk. A create answered with
  an error stores nothing; on SQLite, when the disk fails the sync of a batch's commit, that commit is
  taken back before its 503s are sent (the service's log says whether it could be).
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

type Operation = {
  operationId?: string
  parameters?: unknown[]
  responses?: Record<string, { headers?: Record<string, unknown>; content?: unknown }>
}

/**
 * What route schemas cannot say one operation at a time: every answer carries X-Request-Id, and
 * a HEAD answer has the headers of its GET's but no body, so its responses lose their content.
 */
function addCommonHeaders<T extends { paths?: Record<string, Record<string, Operation>> }>(document: T): T {
  for (const item of Object.values(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(item)) {
      operation.parameters = [...(operation.parameters ?? []), requestIdParameter]
      for (const response of Object.values(operation.responses ?? {})) {
        response.headers = { ...response.headers, ...requestIdHeader }
        if (method === 'head') delete response.content
      }
    }
  }
  return document
}

/** Registers @fastify/swagger; routes declared after this appear in the document. */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    // Every GET also answers HEAD (Fastify's exposeHeadRoutes), and the Allow headers say so; the
    // document lists those too, each with operationId `<get's>-head` and the GET's responses
    // without their bodies (addCommonHeaders).
    exposeHeadRoutes: true,
    // Only an OpenAPI document is configured, so only an openapiObject ever comes here.
    transformObject: (documentObject) =>
      addCommonHeaders((documentObject as { openapiObject: never }).openapiObject),
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'OpenAPI Plant Store',
        version: '1.0.0',
        description: `A sample API that uses a plant store as an example to demonstrate features in the OpenAPI specification.\n${decisions}`,
        license: { name: 'MIT', identifier: 'MIT' },
      },
      components: {
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } },
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
        summary: 'This OpenAPI 3.1 document',
        security: [],
        response: {
          200: { type: 'object', additionalProperties: true, description: 'The document' },
          ...errorResponses(),
        },
      },
    },
    async () => app.swagger(),
  )
}
