// The workloads, driven by autocannon in this process. Every POST carries an id never sent before
// in this run (a sequential counter, or 63 random bits), so each create really inserts a row.
import { randomBytes } from 'node:crypto'
import autocannon from 'autocannon'
import { storedId } from './stored-ids.mjs'

export const SCENARIOS = {
  'create-seq': { title: 'POST /plants, new sequential ids', creates: true },
  'create-rand': { title: 'POST /plants, new random 63-bit ids', creates: true },
  'get-id': { title: 'GET /plants/{id} of a stored plant (uniform over the stored ids)', reads: true },
  'list-100': { title: 'GET /plants?limit=100 (first page)', reads: true },
  'list-after': {
    title: 'GET /plants?limit=100&after={random stored id} (pages from random cursors: rarely cached)',
    reads: true,
  },
  'mix-90-10': {
    title: '90% GET /plants/{id}, 10% POST /plants (new sequential ids)',
    reads: true,
    creates: true,
  },
}

// Sequential ids start far above the seeded ids (1..10,000) and never repeat within a run; in a big
// store they all fall into the one gap between its first and second plant, so they still land
// together at one place of the tree.
let sequence = 1_000_000_000_000n
const nextSequential = () => sequence++

let pool = Buffer.alloc(0)
let poolOffset = 0
function nextRandom() {
  if (poolOffset + 8 > pool.length) {
    pool = randomBytes(8 * 8192)
    poolOffset = 0
  }
  const value = pool.readBigUInt64LE(poolOffset) & 0x7fff_ffff_ffff_ffffn
  poolOffset += 8
  return value
}

/**
 * Sequential creates share one tag, as a batch of new plants of one kind would. A random id takes
 * one of the 100 tags the pre-filled plants carry, so that in a big store its entry in the
 * (tag, id) index lands among stored ones too, not in a region of its own.
 */
const plantBody = (id, tag = 'bench') => `{"id":${id},"name":"bench plant","tag":"${tag}"}`
const randomPlantBody = (id) => plantBody(id, `tag${id % 100n}`)

/**
 * autocannon `requests` for a scenario. The store holds plants 1..readMax, whose ids are `idStep`
 * apart (stored-ids.mjs; 1 for a seeded store).
 */
export function requestsFor(scenario, { token, readMax, idStep = 1n }) {
  const authorization = `Bearer ${token}`
  const postHeaders = { authorization, 'content-type': 'application/json' }
  const getHeaders = { authorization }
  const randomStoredId = () => storedId(1 + Math.floor(Math.random() * Math.max(1, readMax)), idStep)
  switch (scenario) {
    case 'create-seq':
    case 'create-rand': {
      const nextBody =
        scenario === 'create-seq' ? () => plantBody(nextSequential()) : () => randomPlantBody(nextRandom())
      return [
        {
          method: 'POST',
          path: '/plants',
          headers: postHeaders,
          setupRequest: (request) => {
            request.body = nextBody()
            return request
          },
        },
      ]
    }
    case 'get-id':
      return [
        {
          method: 'GET',
          path: '/plants/1',
          headers: getHeaders,
          setupRequest: (request) => {
            request.path = `/plants/${randomStoredId()}`
            return request
          },
        },
      ]
    case 'list-100':
      return [{ method: 'GET', path: '/plants?limit=100', headers: getHeaders }]
    case 'list-after':
      // Cursors stop 100 short of the end so that every page is full.
      return [
        {
          method: 'GET',
          path: '/plants?limit=100&after=0',
          headers: getHeaders,
          setupRequest: (request) => {
            const k = Math.floor(Math.random() * Math.max(1, readMax - 100))
            request.path = `/plants?limit=100&after=${storedId(k, idStep)}`
            return request
          },
        },
      ]
    case 'mix-90-10': {
      let count = 0
      return [
        {
          method: 'GET',
          path: '/plants/1',
          headers: getHeaders,
          setupRequest: (request) => {
            count++
            if (count % 10 === 0) {
              request.method = 'POST'
              request.path = '/plants'
              request.headers = postHeaders
              request.body = plantBody(nextSequential())
            } else {
              request.path = `/plants/${randomStoredId()}`
            }
            return request
          },
        },
      ]
    }
    default:
      throw new Error(`unknown scenario ${scenario}`)
  }
}

/** One bounded autocannon run; returns the numbers the report needs. */
export async function runLoad({ url, scenario, token, readMax, idStep, connections, duration }) {
  const result = await autocannon({
    url,
    connections,
    duration,
    timeout: 10,
    // autocannon checks for the end of a run once per sample: sample every 100 ms so that a
    // run lasts its duration, not the next whole second.
    sampleInt: 100,
    requests: requestsFor(scenario, { token, readMax, idStep }),
  })
  const ok = result['2xx']
  return {
    rps: ok / result.duration,
    ok,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    seconds: result.duration,
    latencyMs: {
      mean: result.latency.average,
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      max: result.latency.max,
    },
    statusCodes: Object.fromEntries(
      Object.entries(result.statusCodeStats ?? {}).map(([code, s]) => [code, s.count]),
    ),
  }
}
