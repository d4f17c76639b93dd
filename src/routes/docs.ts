import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'

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

/**
 * GET /docs: the interactive reference (Swagger UI, served from its npm package), read without a
 * token; "Try it out" sends the bearer token the reader enters under Authorize. GET / points to it.
 * The page sets no CORS header, and its routes are hidden from the document.
 */
export async function docsRoutes(app: FastifyInstance): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: CONTENT_SECURITY_POLICY,
    theme: { title: 'Plant Store API reference' },
    uiConfig: { docExpansion: 'list', deepLinking: true, displayOperationId: true },
  })
  app.get('/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/docs', 302))
}
