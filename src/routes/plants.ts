import type {
  FastifyInstance,
  FastifyRequest,
  preParsingHookHandler,
  preValidationHookHandler,
} from 'fastify'
import fp from 'fastify-plugin'
import { ApiError } from '../errors.js'
import { named } from '../hook-order.js'
import { sendContinue } from '../http/expect-header.js'
import { PLAIN_HOST } from '../http/host-header.js'
import { routeNotFound } from '../http/request-checks.js'
import { errorResponses } from '../schemas/error.js'
import { type NewPlantBody, PlantIdParams, plantFieldWords } from '../schemas/plant.js'
import { pickPlantFields } from '../storage/plant-fields.js'
import type { Storage } from '../storage/storage.js'
import { plantConflict, plantFromBody } from './new-plant.js'
import { textId } from './plant-ids.js'
import { checkText } from './plant-text.js'

const bearer = [{ bearerAuth: [] }]
const tags = ['plants']
const DEFAULT_LIMIT = 100
const LIMIT_RULE = 'must be an integer from 1 to 1000, written in decimal digits'
/**
 * Reads are sent as the JSON text the store built (see PlantPage in storage.ts); a string body
 * with a JSON content type skips Fastify's serializer. The declared response schemas still
 * describe it, and the HTTP tests check the bodies against them.
 */
const JSON_TYPE = 'application/json; charset=utf-8'

const ListQuery = {
  type: 'object',
  properties: {
    limit: {
      type: 'integer',
      minimum: 1,
      maximum: 1000,
      default: DEFAULT_LIMIT,
      description: 'Page size, 1 to 1000.',
    },
    after: {
      type: 'integer',
      format: 'int64',
      description: 'Keyset cursor: only plants with a larger id are returned. An exact int64.',
      examples: [10],
    },
    tag: { type: 'string', minLength: 1, maxLength: 100, description: 'Only plants with exactly this tag.' },
  },
}

/**
 * Builds the `Link: <...>; rel="next"` URL from the request's own origin and filters. The origin
 * comes from the client (an absolute-form target, Host, or X-Forwarded-* from a trusted proxy); when it is missing
 * (HTTP/1.0) or not a plain host (a forwarded one: Host itself is checked by hostRefusal), the
 * link is relative to the request URL instead (RFC 8288 allows it), so a crafted Host cannot add
 * link-values or point the link elsewhere.
 */
function nextLink(request: FastifyRequest, limit: number, after: bigint, tag: string | undefined): string {
  const params = new URLSearchParams({ limit: String(limit), after: String(after) })
  if (tag !== undefined) params.set('tag', tag)
  return `<${requestOrigin(request)}/plants?${params}>; rel="next"`
}

/** The scheme and authority of an absolute-form request target (`GET http://host/plants`). */
const ABSOLUTE_FORM = /^(https?):\/\/([^/?#]*)/i

/** The origin the client addressed, or '' when it is unknown or not a plain host. */
function requestOrigin(request: FastifyRequest): string {
  // RFC 9112 3.2.2: the authority of an absolute-form target wins over the Host header.
  const absolute = ABSOLUTE_FORM.exec(request.raw.url ?? '')
  const [protocol, host] = absolute
    ? [absolute[1]?.toLowerCase(), absolute[2]]
    : [request.protocol, request.host]
  return (protocol === 'http' || protocol === 'https') && PLAIN_HOST.test(host ?? '')
    ? `${protocol}://${host}`
    : ''
}

/** POST, GET and DELETE on /plants and /plants/{id}. */
function plants(app: FastifyInstance, { storage }: { storage: Storage }, next: () => void): void {
  const canRead = app.bearerAuth('plants:read')
  const canWrite = app.bearerAuth('plants:write')
  // No route here sets its own limit: the server's is every route's.
  const bodyLimit = app.initialConfig.bodyLimit ?? 0
  // RFC 9110 8.4: a content coding the server does not apply is a 415. Read as is, a gzip body
  // was a 400 for bad UTF-8, and plain JSON labelled gzip was stored.
  // The 100 Continue a client may wait for goes out here, after authentication, once nothing
  // but the body itself can refuse the request (http/expect-header.ts).
  const checkEncoding: preParsingHookHandler = (request, reply, payload, done) => {
    const coding = request.headers['content-encoding']?.trim().toLowerCase()
    if (!coding || coding === 'identity') {
      sendContinue(request, reply, bodyLimit)
      return done(null, payload)
    }
    done(
      new ApiError(
        'UNSUPPORTED_MEDIA_TYPE',
        `Content-Encoding ${coding} is not supported: send the body uncompressed`,
        {
          details: [{ field: 'Content-Encoding', rule: 'must be absent or identity' }],
        },
      ),
    )
  }
  // Without a Content-Type Fastify skips parsing and the body looks merely absent; say why.
  const requireContentType: preValidationHookHandler = (request, _reply, done) => {
    if (request.headers['content-type']) return done()
    done(new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Content-Type header is required: application/json'))
  }

  app.post<{ Body: NewPlantBody }>(
    '/plants',
    {
      onRequest: canWrite,
      preParsing: named(app, 'plants: Content-Encoding, 100 Continue', checkEncoding),
      preValidation: named(app, 'plants: Content-Type', requireContentType),
      schema: {
        operationId: 'addPlant',
        tags,
        summary: 'Create a plant',
        description:
          `Creates a new plant in the store. Replaying the same id with the same ${plantFieldWords('and')} ` +
          `answers 200 and stores nothing new; the same id with another ${plantFieldWords('or')} answers 409. ` +
          'A 200 is sent only after the plant is committed durably.',
        security: bearer,
        body: { $ref: 'NewPlant' },
        response: {
          200: { $ref: 'Plant', description: 'plant response' },
          ...errorResponses(400, 401, 403, 409, 413, 415, 500, 503),
        },
      },
    },
    async (request) => {
      const plant = plantFromBody(request.body)
      const outcome = await storage.createPlant(plant)
      if (outcome.kind === 'conflict') throw plantConflict(plant, outcome.existing)
      return pickPlantFields(plant)
    },
  )

  // Query and path values stay text (see http/validators.ts); ids are converted exactly here.
  app.get<{ Querystring: Record<string, string | undefined> }>(
    '/plants',
    {
      onRequest: canRead,
      // A repeated parameter arrives as an array, which the schema would call "must be integer".
      preValidation: (request, _reply, done) => {
        const repeated = Object.keys(ListQuery.properties).find((name) => Array.isArray(request.query[name]))
        if (repeated === undefined) return done()
        const rule = 'must be given at most once'
        done(
          new ApiError('VALIDATION_FAILED', `query parameter ${repeated} ${rule}`, {
            details: [{ field: repeated, rule }],
          }),
        )
      },
      schema: {
        operationId: 'listPlants',
        tags,
        summary: 'List plants by id, ascending',
        description:
          'Keyset pagination: when more plants remain, a `Link: <...>; rel="next"` header carries the next ' +
          'page URL; the last page has none.',
        security: bearer,
        querystring: ListQuery,
        response: {
          200: {
            $ref: 'PlantList',
            description: 'A page of plants ordered by id',
            headers: {
              Link: {
                type: 'string',
                description: 'RFC 8288 link to the next page, rel="next"; absent on the last page.',
              },
            },
          },
          ...errorResponses(400, 401, 403, 500, 503),
        },
      },
    },
    async (request, reply) => {
      const query = request.query
      // Ajv checked a coerced copy, which takes "0x10", "1e2", "+5" or " 3"; the text itself must be
      // decimal digits, like the ids.
      const limit = query.limit === undefined ? DEFAULT_LIMIT : Number(query.limit)
      if ((query.limit !== undefined && !/^0*\d{1,4}$/.test(query.limit)) || limit < 1 || limit > 1000) {
        throw new ApiError('VALIDATION_FAILED', `query parameter limit ${LIMIT_RULE}`, {
          details: [{ field: 'limit', rule: LIMIT_RULE }],
        })
      }
      const after = query.after === undefined ? undefined : textId(query.after, 'after', 'query parameter')
      const tag = query.tag
      checkText(tag, 'tag', 'query parameter ')
      const page = await storage.listPlantsJson({ after, tag, limit })
      if (page.more && page.lastId !== undefined)
        reply.header('link', nextLink(request, limit, page.lastId, tag))
      return reply.type(JSON_TYPE).send(page.json)
    },
  )

  const byId = {
    security: bearer,
    params: PlantIdParams,
  }

  app.get<{ Params: { id: string } }>(
    '/plants/:id',
    {
      onRequest: canRead,
      schema: {
        ...byId,
        operationId: 'getPlant',
        tags,
        summary: 'Read one plant',
        description:
          'Answers the stored plant with its id, printed with every digit; 404 when no plant has it.',
        response: {
          200: { $ref: 'StoredPlant', description: 'The plant, with its id' },
          ...errorResponses(400, 401, 403, 404, 500, 503),
        },
      },
    },
    async (request, reply) => {
      const id = textId(request.params.id, 'id', 'path parameter')
      const json = await storage.readPlantJson(id)
      if (json === undefined) throw new ApiError('NOT_FOUND', `no plant with id ${id}`)
      return reply.type(JSON_TYPE).send(json)
    },
  )

  app.delete<{ Params: { id: string } }>(
    '/plants/:id',
    {
      onRequest: canWrite,
      schema: {
        ...byId,
        operationId: 'deletePlant',
        tags,
        summary: 'Delete one plant',
        description: 'The id can be created again afterwards. A request body is ignored.',
        response: {
          204: { type: 'null', description: 'Deleted; no body' },
          ...errorResponses(400, 401, 403, 404, 500, 503),
        },
      },
    },
    async (request, reply) => {
      const id = textId(request.params.id, 'id', 'path parameter')
      if (!(await storage.deletePlant(id))) throw new ApiError('NOT_FOUND', `no plant with id ${id}`)
      return reply.code(204).send()
    },
  )
  // `/plants/` would be `/plants/{id}` with an empty id: a POST to it was a 405 that sent the
  // client to GET and DELETE. Like `/plants/1/`, it is a path the API does not have.
  app.route({
    method: app.supportedMethods,
    url: '/plants/',
    schema: { hide: true },
    onRequest: (request, _reply, done) => done(routeNotFound(request)),
    handler: async () => {
      throw new Error('unreachable: the onRequest hook answers every request of this route')
    },
  })
  next()
}

export default fp(plants, { name: 'routes-plants', dependencies: ['contract', 'auth'] })
