/**
 * What the fuzz properties share: a real service per store, a seed that can be replayed, and the
 * invariants every answer and every case must keep.
 *
 * Replay: a failure prints `FUZZ_SEED=<n>` (and `FUZZ_PATH=<p>`, the shrunk case); run the same file
 * with those set. FUZZ_RUNS scales every property's number of cases (default 1).
 */
import assert from 'node:assert/strict'
import { after, before, describe, it, type TestContext } from 'node:test'
import fc from 'fast-check'
import { startService, type StoreKind, type TestService, testStores } from '../helpers.js'
import { exchange, parseAnswers, type RawAnswer, requestBytes } from '../raw-http.js'

const seedFromEnv = process.env.FUZZ_SEED
/** One seed for the whole run, printed so that any property can be replayed with it. */
export const FUZZ_SEED =
  seedFromEnv !== undefined && seedFromEnv !== '' ? Number(seedFromEnv) : Math.floor(Math.random() * 2 ** 31)
const FUZZ_PATH = process.env.FUZZ_PATH || undefined
const SCALE = Number(process.env.FUZZ_RUNS ?? '1')

/** The 5xx statuses the API documents: not implemented (framing, CONNECT), unavailable, HTTP version. */
const DOCUMENTED_5XX = [501, 503, 505]

/**
 * The service under fuzz: the production factory on a fresh store, with short timeouts so that a
 * request the fuzzer leaves unfinished costs seconds, not the default half a minute.
 */
export async function fuzzService(store: StoreKind): Promise<{ service: TestService; token: string }> {
  const service = await startService(store, {
    HEADERS_TIMEOUT_MS: '3000',
    REQUEST_TIMEOUT_MS: '3000',
    LOG_LEVEL: process.env.FUZZ_LOG_LEVEL ?? 'silent',
  })
  return { service, token: await service.token() }
}

/** Every answer: no undocumented 5xx; every error a JSON Error whose `error` is its status. */
export function checkAnswers(answers: readonly RawAnswer[], what: string): void {
  for (const answer of answers) {
    const label = `${what}: ${answer.status} ${answer.body.slice(0, 300)}`
    assert.ok(answer.status < 500 || DOCUMENTED_5XX.includes(answer.status), `undocumented 5xx: ${label}`)
    if (answer.status < 400 || answer.body === '') continue
    assert.match(answer.headers['content-type']?.[0] ?? '', /^application\/json/, label)
    let body: { error?: unknown; message?: unknown }
    try {
      body = JSON.parse(answer.body)
    } catch {
      assert.fail(`an error that is not JSON: ${label}`)
    }
    assert.equal(body.error, answer.status, label)
    assert.equal(typeof body.message, 'string', label)
  }
}

/** Sends raw bytes on a connection of its own and checks every answer it gets. */
export async function sendRaw(
  url: string,
  bytes: string | Buffer | (string | Buffer)[],
  what: string,
  heads = 0,
): Promise<RawAnswer[]> {
  const received = await exchange(url, bytes)
  let answers: RawAnswer[]
  try {
    answers = parseAnswers(received, heads)
  } catch (error) {
    assert.fail(`${what}: ${(error as Error).message}`)
  }
  checkAnswers(answers, what)
  return answers
}

/** The ids of the plants stored now, as written (int64: beyond a double's precision). */
async function storedIds(url: string, auth: [string, string][]): Promise<string[]> {
  const [list] = await sendRaw(url, requestBytes('GET', '/plants?limit=1000', auth), 'list')
  assert.equal(list?.status, 200, `the list after a case: ${list?.body}`)
  return [...(list?.body ?? '').matchAll(/"id":(-?\d+)/g)].map((match) => match[1] as string)
}

/** Deletes every plant, so that each case starts from an empty store. */
export async function emptyStore(service: TestService, token: string): Promise<void> {
  const auth: [string, string][] = [['Authorization', `Bearer ${token}`]]
  for (const id of await storedIds(service.url, auth)) {
    const [gone] = await sendRaw(service.url, requestBytes('DELETE', `/plants/${id}`, auth), 'cleanup')
    assert.ok(gone && gone.status < 300, `deleting plant ${id}: ${gone?.status}`)
  }
}

/**
 * Nothing stored from a rejected request: the store (empty when the case began) holds no more
 * plants than creates were accepted in this case.
 */
export async function checkStored(
  service: TestService,
  token: string,
  acceptedCreates: number,
): Promise<void> {
  const ids = await storedIds(service.url, [['Authorization', `Bearer ${token}`]])
  assert.ok(
    ids.length <= acceptedCreates,
    `stored ${ids.length} plants from ${acceptedCreates} accepted creates`,
  )
}

/** The service still answers its liveness probe. */
export async function checkAlive(service: TestService): Promise<void> {
  const [health] = await sendRaw(service.url, requestBytes('GET', '/healthz'), 'healthz')
  assert.equal(health?.status, 200)
}

/** Accepted creates among a case's answers to POST /plants. */
export const acceptedCount = (answers: readonly RawAnswer[]) =>
  answers.filter((answer) => answer.status === 200 || answer.status === 201).length

/**
 * Runs an async property with the run's seed and `runs` cases (times FUZZ_RUNS), `beforeEach`
 * first in each (shrinking runs included); on failure the error names the seed and path to replay.
 */
export async function fuzz<T>(
  t: TestContext,
  arbitrary: fc.Arbitrary<T>,
  runs: number,
  check: (value: T) => Promise<void>,
  beforeEach: () => Promise<void>,
): Promise<void> {
  t.diagnostic(`FUZZ_SEED=${FUZZ_SEED}`)
  const numRuns = Math.max(1, Math.round(runs * SCALE))
  const details = await fc.check(fc.asyncProperty(arbitrary, check).beforeEach(beforeEach), {
    seed: FUZZ_SEED,
    path: FUZZ_PATH,
    numRuns,
    // Shrinking resends cases; a bound keeps a failing run short.
    maxSkipsPerRun: 0,
    interruptAfterTimeLimit: 90_000,
  })
  if (details.failed) {
    const replay = `FUZZ_SEED=${details.seed} FUZZ_PATH=${JSON.stringify(details.counterexamplePath)}`
    const cause =
      details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance)
    assert.fail(
      `fuzz property failed after ${details.numRuns} cases; replay with ${replay}\n` +
        `counterexample: ${fc.stringify(details.counterexample).slice(0, 2000)}\n${cause}`,
    )
  }
}

/** The running service and a full-scope token, set once the suite's `before` has run. */
export interface FuzzContext {
  service: TestService
  token: string
}

type Property = <T>(
  name: string,
  arbitrary: fc.Arbitrary<T>,
  runs: number,
  check: (value: T) => Promise<void>,
) => void

/**
 * A fuzz suite on every store: one service for its properties, each case starting from an empty
 * store, and the liveness probe checked after each property.
 */
export function describeFuzz(title: string, define: (ctx: FuzzContext, property: Property) => void): void {
  for (const store of testStores()) {
    describe(`fuzz: ${title} (${store})`, () => {
      const ctx = {} as FuzzContext
      before(async () => Object.assign(ctx, await fuzzService(store)))
      after(() => ctx.service.close())
      const property: Property = (name, arbitrary, runs, check) =>
        it(name, async (t) => {
          await fuzz(t, arbitrary, runs, check, () => emptyStore(ctx.service, ctx.token))
          await checkAlive(ctx.service)
        })
      define(ctx, property)
    })
  }
}
