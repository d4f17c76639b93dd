#!/usr/bin/env node
// The benchmark's yardstick: a bare `node:http` server that does only the minimum each request of
// the Plant Store API needs, with no framework, no validation beyond JSON.parse and no storage.
//
//   POST /plants          compares the bearer token with a fixed one, parses the JSON body and
//                         echoes {name, tag} (the baseline, word for word)
//   GET  /plants/{id}     compares the token, checks the id is int64-shaped digits and answers a fixed
//                         {id, name, tag} carrying the requested id (copied as text, all digits kept)
//   GET  /plants?limit=N  compares the token and answers JSON.stringify of a fixed in-memory array of
//                         N (default 100) plants, serialised on every request as any server must
//   GET  /healthz         {"status":"ok"}, for the harness's readiness poll
//
// Everything else is 404. Environment: PORT, HOST (default 127.0.0.1), BENCH_TOKEN (required).
import http from 'node:http'
import { PLANTS, yardstickSettings } from './lib/yardstick.mjs'

const { port, host, expected } = yardstickSettings('baseline')

function send(res, status, body) {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  })
  res.end(body)
}

const unauthorized = '{"code":"UNAUTHENTICATED"}'
const notFound = '{"code":"NOT_FOUND"}'
const badRequest = '{"code":"BAD_REQUEST"}'

const server = http.createServer((req, res) => {
  const url = req.url ?? '/'
  if (req.method === 'GET' && url === '/healthz') return send(res, 200, '{"status":"ok"}')
  if (req.headers.authorization !== expected) {
    req.resume()
    return send(res, 401, unauthorized)
  }
  if (req.method === 'POST' && url === '/plants') {
    const chunks = []
    req.on('data', (chunk) => chunks.push(chunk))
    req.on('end', () => {
      let body
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      } catch {
        return send(res, 400, badRequest)
      }
      if (body === null || typeof body !== 'object') return send(res, 400, badRequest)
      send(res, 200, JSON.stringify({ name: body.name, tag: body.tag }))
    })
    return
  }
  if (req.method === 'GET' && url.startsWith('/plants')) {
    const question = url.indexOf('?')
    const path = question === -1 ? url : url.slice(0, question)
    if (path === '/plants') {
      const limit = Number(
        new URLSearchParams(question === -1 ? '' : url.slice(question + 1)).get('limit') ?? 100,
      )
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) return send(res, 400, badRequest)
      return send(res, 200, JSON.stringify(PLANTS.slice(0, limit)))
    }
    const id = path.slice('/plants/'.length)
    if (path.startsWith('/plants/') && /^-?\d{1,19}$/.test(id)) {
      // The id is echoed as text so that every int64 keeps its digits, as the service does.
      return send(res, 200, `{"id":${id},"name":${JSON.stringify('bench plant')},"tag":"bench"}`)
    }
  }
  req.resume()
  send(res, 404, notFound)
})

server.keepAliveTimeout = 5000
server.listen(port, host, () => {
  const address = server.address()
  process.stdout.write(`baseline listening on http://${host}:${address.port}\n`)
})

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close(() => process.exit(0))
    server.closeAllConnections()
  })
}
