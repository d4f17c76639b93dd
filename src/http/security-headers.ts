import type { FastifyReply, FastifyRequest } from 'fastify'

/** `/plants`, `/plants/...` and `/plants?...`: answers that hold (or deny) stored data. */
export const isPlantsPath = (url: string): boolean =>
  url.startsWith('/plants') && (url.length === 7 || url[7] === '/' || url[7] === '?')

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
 * Set on Fastify's reply by the first onRequest hook (http/protocol.ts), which runs for every
 * routed request, a 404 and every error answer after it. Answers that run no hook add
 * `securityHeaders` themselves: the router's refusals (http/server-options.ts's frameworkErrors)
 * and those written straight to the socket (parser errors, CONNECT, a refused Expect). Not
 * `res.setHeader`: a header set on the raw response sends every header of the answer through
 * Node's slow validating path in `writeHead`.
 */
export function setSecurityHeaders(request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-content-type-options', 'nosniff')
  if (isPlantsPath(request.url)) reply.header('cache-control', 'no-store')
}
