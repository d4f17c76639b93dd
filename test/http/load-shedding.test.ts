import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { onRefusal, type RefusalKind } from '../../src/http/refusals.js'
import { startService, type TestService, waitFor } from '../helpers.js'
import { type ApiResponse, request } from '../http-client.js'

/** Blocks this thread, and so the service running in it, as a long synchronous task would. */
const blockEventLoop = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)

describe('load shedding when the event loop lags (LOAD_SHED_EVENT_LOOP_DELAY_MS)', () => {
  let service: TestService
  let token: string
  const refusals: RefusalKind[] = []
  const unsubscribe = onRefusal((kind) => refusals.push(kind))
  before(async () => {
    // A low threshold, so that one 4 s stall lifts the mean delay of its sampling second past it.
    service = await startService('sqlite', { LOAD_SHED_EVENT_LOOP_DELAY_MS: '15' })
    token = await service.token()
  })
  after(async () => {
    unsubscribe()
    await service.close()
  })

  it('answers 503 with Retry-After in the Error shape while /healthz answers 200, then recovers', async () => {
    // Other test files share the cores: a lag of theirs may shed a request before the stall.
    await waitFor('the service to serve before the stall', async () => {
      return (await request('GET', `${service.url}/plants`, { token })).status === 200
    })
    blockEventLoop(4000)
    const shed = await waitFor('a request to be shed', async () => {
      const answer = await request('GET', `${service.url}/plants`, { token })
      return answer.status === 503 ? answer : undefined
    })
    const health = await request('GET', `${service.url}/healthz`)
    assertShed(shed)
    assert.equal(health.status, 200)
    assert.ok(refusals.includes('load-shed'))
    await waitFor('the service to serve again', async () => {
      return (await request('GET', `${service.url}/plants`, { token })).status === 200
    })
  })
})

function assertShed(answer: ApiResponse): void {
  assert.equal(answer.json.error, 503)
  assert.equal(answer.json.code, 'OVERLOADED')
  assert.match(answer.json.message, /overloaded \(its event loop lags\)/)
  assert.equal(answer.headers.get('retry-after'), '5')
}
