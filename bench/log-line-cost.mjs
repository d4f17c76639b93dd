#!/usr/bin/env node
// CPU time per request line: the service's JSON logging (src/observability/log-options.ts and
// src/observability/log-destination.ts) against pino's defaults as the service had them (one synchronous write per line,
// epoch times, numeric levels), each writing the same lines into a file, in bursts of BURST per
// turn of the event loop, as a busy server finishes several requests per turn.
// Usage: node bench/log-line-cost.mjs [lines] [burst]   (build first: npm run build)
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pino from 'pino'
import { loggerOptions } from '../dist/src/observability/log-options.js'
import { LogDestination } from '../dist/src/observability/log-destination.js'

const lines = Number(process.argv[2] ?? 200_000)
const burst = Number(process.argv[3] ?? 8)
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'log-line-cost-'))
const redact = { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' }
const { stream: _stdout, ...shipped } = await loggerOptions({ logLevel: 'info', logFormat: 'json' })

const variants = {
  'one write per line, epoch': (file) => {
    const out = pino.destination({ dest: file, sync: true })
    return [pino({ level: 'info', redact }, out), () => out.flushSync()]
  },
  'as shipped': (file) => {
    const out = new LogDestination(fs.openSync(file, 'w'))
    return [pino(shipped, out), () => out.flushSync()]
  },
}

const line = (i) => ({
  reqId: `6f1c2d3e-${String(i).padStart(4, '0')}-4a5b-8c9d-0e1f2a3b4c5d`,
  method: 'GET',
  route: '/plants/:id',
  url: `/plants/${i}`,
  status: 200,
  durationMs: 1.23,
})

for (let round = 1; round <= 3; round++) {
  for (const [name, make] of Object.entries(variants)) {
    const file = path.join(dir, `${round}-${name.replace(/\W+/g, '-')}.log`)
    const [log, flush] = make(file)
    const start = process.cpuUsage()
    for (let i = 0; i < lines; i += burst) {
      for (let j = i; j < i + burst; j++) log.info(line(j), 'request')
      await new Promise((resolve) => setImmediate(resolve))
    }
    flush()
    const used = process.cpuUsage(start)
    const written = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).length
    const us = (used.user + used.system) / lines
    console.log(`round ${round}  ${name.padEnd(26)} ${us.toFixed(2)} µs CPU per line (${written} written)`)
  }
}
fs.rmSync(dir, { recursive: true, force: true })
