// A fixed number of requests, 16 connections, for bench/instructions.sh: GET /plants/1 (stored
// first), or POST /plants with new ids from a random base, so that reruns on one store never repeat one.
// Usage: node bench/lib/fixed-load.mjs PORT get|create REQUESTS TOKEN_FILE
import fs from 'node:fs'
import { randomInt } from 'node:crypto'
import autocannon from 'autocannon'

const [port, scenario, amount, tokenFile] = process.argv.slice(2)
const url = `http://127.0.0.1:${port}`
const headers = {
  authorization: `Bearer ${fs.readFileSync(tokenFile, 'utf8').trim()}`,
  'content-type': 'application/json',
}
const seeded = await fetch(`${url}/plants`, { method: 'POST', headers, body: '{"id":1,"name":"counted"}' })
if (seeded.status !== 200)
  throw new Error(`seeding plant 1 answered ${seeded.status}: ${await seeded.text()}`)

let next = BigInt(randomInt(2 ** 43)) * 1_000_000n
const requests =
  scenario === 'create'
    ? [
        {
          method: 'POST',
          path: '/plants',
          headers,
          setupRequest: (request) => ({ ...request, body: `{"id":${next++},"name":"counted"}` }),
        },
      ]
    : [{ method: 'GET', path: '/plants/1', headers }]
const result = await autocannon({ url, connections: 16, amount: Number(amount), timeout: 60, requests })
const failed = result.non2xx + result.errors + result.timeouts
if (failed > 0) throw new Error(`${failed} of ${amount} requests failed`)
