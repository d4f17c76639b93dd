import { METHODS } from 'node:http'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config } from '../config.js'
import { sharedSchemas } from '../schemas/shared.js'
import { installErrorHandler } from './error-handler.js'
import { registerJsonBodyParser } from './json-body.js'
import { routeNotFound } from './request-checks.js'
import { installValidators } from './validators.js'

/**
 * Fastify routes only the methods it knows (GET, POST, TRACE, QUERY, ...); a request with any
 * other method Node's parser accepts (PROPFIND, PURGE, ...) would find no route and get a 404.
 * Declaring them all lets the catch-all routes (routes/unrouted.ts) answer 405 for every method.
 * CONNECT never reaches a route: Node hands it to the server's 'connect' event (routes/connect.ts).
 */
function routeEveryHttpMethod(app: FastifyInstance): void {
  // No route reads a DELETE's body; treated as bodyless, one is ignored like a GET's, instead of
  // being parsed into 400, 413 or 415 answers for a body nobody wanted.
  app.addHttpMethod('DELETE', { hasBody: false, overrideExisting: true })
  for (const method of METHODS) {
    if (method === 'CONNECT' || app.supportedMethods.includes(method)) continue
    app.addHttpMethod(method)
  }
}

/**
 * What every route shares and no hook does: every HTTP method, the shared JSON Schemas and their
 * validators, the JSON body parser, the error handler that writes the Error shape, and the 404.
 */
function contract(app: FastifyInstance, { config }: { config: Config }, next: () => void): void {
  routeEveryHttpMethod(app)
  for (const schema of sharedSchemas) app.addSchema(schema)
  installValidators(app, sharedSchemas)
  installErrorHandler(app, config.bodyLimit)
  registerJsonBodyParser(app)
  app.setNotFoundHandler(async (request) => {
    throw routeNotFound(request)
  })
  next()
}

export default fp(contract, { name: 'contract' })
