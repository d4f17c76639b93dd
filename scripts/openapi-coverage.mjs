#!/usr/bin/env node
// The OpenAPI coverage step of `npm test`: every (method, route, status) the test files recorded
// into DIR (test/http-client.ts, one .jsonl per test process) must be declared in the served
// document, with the headers a client acts on that it carried. 404 for unknown routes and 405 for
// unknown methods are not operations. Usage: node scripts/openapi-coverage.mjs DIR (after the build).
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const dir = process.argv[2]
if (!dir) {
  console.error('usage: node scripts/openapi-coverage.mjs DIR')
  process.exit(2)
}
// The document as the app serves it at GET /openapi.json (dump-openapi.mjs asks the route itself).
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-coverage-'))
const docFile = path.join(scratch, 'openapi.json')
execFileSync(process.execPath, [fileURLToPath(new URL('dump-openapi.mjs', import.meta.url)), docFile])
const doc = JSON.parse(fs.readFileSync(docFile, 'utf8'))
fs.rmSync(scratch, { recursive: true, force: true })

// One entry per (method, route, status), and one more per declared header it was seen with.
const seen = new Map()
for (const file of fs.readdirSync(dir)) {
  for (const line of fs.readFileSync(path.join(dir, file), 'utf8').split('\n').filter(Boolean)) {
    const observation = JSON.parse(line)
    const { method, route, status } = observation
    seen.set(`${method} ${route} ${status}`, observation)
    for (const header of observation.headers)
      seen.set(`${method} ${route} ${status} ${header}`, { ...observation, header })
  }
}

const undeclared = []
for (const [key, { method, route, status, header }] of seen) {
  const operation = doc.paths[route]?.[method === 'HEAD' ? 'get' : method.toLowerCase()]
  if (!operation) {
    if (status !== 404 && status !== 405) undeclared.push(`${key} (no such operation)`)
    continue
  }
  const response = operation.responses[String(status)]
  const declared = Object.keys(response?.headers ?? {}).map((name) => name.toLowerCase())
  if (!response || (header && !declared.includes(header))) undeclared.push(key)
}

if (seen.size < 20) {
  console.error(
    `openapi-coverage: expected the suite to observe many kinds of response, saw ${seen.size} in ${dir}`,
  )
  process.exit(1)
}
if (undeclared.length > 0) {
  console.error(
    `openapi-coverage: the served document does not declare ${undeclared.length} observed response(s):`,
  )
  for (const key of undeclared) console.error(`  ${key}`)
  process.exit(1)
}
console.log(`openapi-coverage: all ${seen.size} observed (method, route, status[, header]) are declared`)
