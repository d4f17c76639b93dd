import type { FastifyInstance } from 'fastify'

/** `/plants`, `/plants/...` and `/plants?...`: answers that hold (or deny) stored data. */
export const isPlantsPath = (url: string) => /^\/plants(?:[/?]|$)/.test(url)

/**
 * Headers every answer carries: `nosniff`, so a browser never runs an answer as something other
 * than its declared type; and on /plants `no-store`, so no cache (shared or the browser's) keeps
 * plant data or an authenticated answer.
 */
export function securityHeaders(url: string | undefined): Record<string, string> {
  const headers: Record<string, string> = { 'x-content-type-options': 'nosniff' }
  if (url !== undefined && isPlantsPath(url)) headers['cache-control'] = 'no-store'
  return headers
}

/**
 * Set on the raw response before Fastify sees the request, so answers that run no hook (a path the
 * router cannot decode, a 404, an error) carry them too. Answers written straight to the socket
 * (parser errors, CONNECT, a refused Expect) add `securityHeaders` themselves.
 */
export function installSecurityHeaders(app: FastifyInstance): void {
  app.server.prependListener('request', (req, res) => {
    for (const [name, value] of Object.entries(securityHeaders(req.url))) res.setHeader(name, value)
  })
}
