import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { exactJsonBodies } from './docs-exact-bodies.js'

/**
 * What the page may load: only its own files and the document from this service, so it works
 * with no internet and nothing injected into it can call elsewhere. The logo is a data: image.
 */
const CONTENT_SECURITY_POLICY = {
  'default-src': ["'none'"],
  'script-src': ["'self'"],
  // Swagger UI adds a style element at run time; scripts stay its own files only.
  'style-src': ["'self'", "'unsafe-inline'"],
  'img-src': ["'self'", 'data:'],
  'connect-src': ["'self'"],
  'font-src': ["'self'"],
  'base-uri': ["'none'"],
  'form-action': ["'none'"],
  'frame-ancestors': ["'none'"],
}

/** A leaf, in place of Swagger's icon. */
const FAVICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">' +
  '<path d="M5 27C5 13 14 5 28 4c0 14-8 23-23 23z" fill="#2f7d32"/>' +
  '<path d="M5 27 19 13" stroke="#fff" stroke-width="2" stroke-linecap="round"/></svg>'

/**
 * GET /docs: the interactive reference (Swagger UI, served from its npm package), read without a
 * token; "Try it out" sends the bearer token the reader enters under Authorize. GET / points to it.
 * The page sets no CORS header, and its routes are hidden from the document.
 */
export async function docsRoutes(app: FastifyInstance): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: CONTENT_SECURITY_POLICY,
    theme: {
      title: 'Plant Store API reference',
      favicon: [
        { filename: 'favicon.svg', rel: 'icon', type: 'image/svg+xml', sizes: 'any', content: FAVICON },
      ],
    },
    uiConfig: {
      // BaseLayout has no top bar: no Swagger or Fastify logo, no "Explore" box for other documents.
      layout: 'BaseLayout',
      plugins: [exactJsonBodies],
      docExpansion: 'list',
      // Above 1, the Schemas section resolves every $ref and shows each schema open one level,
      // instead of "(any & object)" for NewPlant and "array<any>" for PlantList.
      defaultModelsExpandDepth: 2,
      deepLinking: true,
      displayOperationId: true,
    },
  })
  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/docs', 302))
}

export default fp(docsRoutes, { name: 'routes-docs', dependencies: ['openapi'] })
