/** Every failure the client can meet, as one PlantStoreError: the service's answers, retries, timeouts, aborts. */
import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { PlantStoreClient, PlantStoreError } from '@plant-store/client'
import { freePort, startService, type TestService, waitFor } from '../helpers.js'
import { FaultProxy } from './fault-proxy.js'

describe('@plant-store/client: errors', () => {
  let service: TestService
  let proxy: FaultProxy
  let token: string
  let client: PlantStoreClient
  /** Through the proxy, with waits short enough for a test. */
  let proxied: PlantStoreClient
  before(async () => {
    service = await startService('sqlite')
    proxy = await FaultProxy.start(service.url)
    token = await service.token()
    client = new PlantStoreClient({ baseUrl: service.url, token })
    proxied = new PlantStoreClient({ baseUrl: proxy.url, token, maxRetryDelayMs: 1500, retryDelayMs: 10 })
  })
  after(async () => {
    await proxy.close()
    await service.close()
  })

  const fails = (promise: Promise<unknown>, expected: Partial<PlantStoreError>) =>
    assert.rejects(promise, (error: unknown) => {
      assert.ok(error instanceof PlantStoreError, String(error))
      for (const [key, value] of Object.entries(expected)) {
        assert.deepEqual(error[key as keyof PlantStoreError], value, key)
      }
      return true
    })

  it('maps 400 with its message and details', async () => {
    await fails(client.createPlant({ id: 1n, name: '' }), {
      status: 400,
      code: 'VALIDATION_FAILED',
      message: 'name must NOT have fewer than 1 characters',
      details: [{ field: 'name', rule: 'must NOT have fewer than 1 characters' }],
    })
  })

  it('maps 401 and 403', async () => {
    const stranger = new PlantStoreClient({ baseUrl: service.url, token: 'pst_not-a-token' })
    await fails(stranger.getPlant(1n), { status: 401, code: 'UNAUTHENTICATED' })
    const reader = new PlantStoreClient({ baseUrl: service.url, token: await service.token(['plants:read']) })
    await fails(reader.createPlant({ id: 1n, name: 'x' }), { status: 403, code: 'INSUFFICIENT_SCOPE' })
  })

  it('maps 404 on read and delete, and 409 with the field that differs', async () => {
    await fails(client.getPlant(404n), { status: 404, code: 'NOT_FOUND', message: 'no plant with id 404' })
    await fails(client.deletePlant(404n), { status: 404, code: 'NOT_FOUND' })
    await client.createPlant({ id: 409n, name: 'first' })
    await fails(client.createPlant({ id: 409n, name: 'second' }), {
      status: 409,
      code: 'PLANT_CONFLICT',
      details: [{ field: 'name', rule: 'differs from the stored plant with this id' }],
    })
  })

  it('maps 413 and 415', async () => {
    await fails(client.createPlant({ id: 413n, name: 'x'.repeat(20_000) }), {
      status: 413,
      code: 'BODY_TOO_LARGE',
    })
    // Only a fetch that rewrites the request can send another content type through the client.
    const relabelled = new PlantStoreClient({
      baseUrl: service.url,
      token,
      fetch: (url, init) =>
        fetch(url, { ...init, headers: { ...init?.headers, 'content-type': 'text/plain' } }),
    })
    await fails(relabelled.createPlant({ id: 415n, name: 'x' }), {
      status: 415,
      code: 'UNSUPPORTED_MEDIA_TYPE',
    })
  })

  it('retries a read answered 503 after its Retry-After, and then succeeds', async () => {
    await client.createPlant({ id: 503n, name: 'patient' })
    proxy.seen.length = 0
    proxy.script.push({ status: 503, code: 'STORE_UNAVAILABLE', retryAfter: '1' })
    assert.deepEqual(await proxied.getPlant(503n), { id: 503n, name: 'patient' })
    assert.equal(proxy.seen.length, 2)
    const [first, second] = proxy.seen
    assert.ok(second!.at - first!.at >= 1000, 'the second attempt waited for Retry-After')
  })

  it('retries a create by id answered 429, and a delete answered 503', async () => {
    proxy.seen.length = 0
    proxy.script.push({ status: 429, code: 'TOO_MANY_REQUESTS', retryAfter: '0' })
    assert.deepEqual(await proxied.createPlant({ id: 429n, name: 'again' }), { name: 'again' })
    proxy.script.push({ status: 503, code: 'STORE_UNAVAILABLE' })
    await proxied.deletePlant(429n)
    assert.deepEqual(
      proxy.seen.map((request) => request.method),
      ['POST', 'POST', 'DELETE', 'DELETE'],
    )
    await fails(client.getPlant(429n), { status: 404 })
  })

  it('gives up after maxAttempts, throwing the last 503', async () => {
    proxy.seen.length = 0
    for (let i = 0; i < 3; i++) proxy.script.push({ status: 503, code: 'STORE_UNAVAILABLE', retryAfter: '0' })
    await fails(proxied.getPlant(1n), { status: 503, code: 'STORE_UNAVAILABLE', message: 'scripted 503' })
    assert.equal(proxy.seen.length, 3)
  })

  it('does not retry a 500', async () => {
    proxy.seen.length = 0
    proxy.script.push({ status: 500, code: 'INTERNAL' })
    await fails(proxied.getPlant(1n), { status: 500, code: 'INTERNAL' })
    assert.equal(proxy.seen.length, 1)
  })

  it('caps a long Retry-After at maxRetryDelayMs', async () => {
    proxy.seen.length = 0
    proxy.script.push({ status: 503, code: 'STORE_UNAVAILABLE', retryAfter: '3600' })
    await fails(proxied.getPlant(1n), { status: 404 })
    assert.equal(proxy.seen.length, 2)
  })

  it('times out a call that gets no answer, and aborts on its signal', async () => {
    proxy.script.push('hold')
    await fails(proxied.getPlant(1n, { timeoutMs: 200 }), { status: 0, code: 'TIMEOUT' })
    proxy.script.push('hold')
    const controller = new AbortController()
    const arrived = proxy.seen.length + 1
    const call = proxied.listPlants({}, { signal: controller.signal })
    await waitFor('the held request', () => proxy.seen.length === arrived)
    controller.abort(new Error('the user left'))
    await fails(call, { status: 0, code: 'ABORTED' })
  })

  it('reports an AbortSignal.timeout() passed as signal as TIMEOUT, not ABORTED', async () => {
    proxy.script.push('hold')
    await assert.rejects(proxied.getPlant(1n, { signal: AbortSignal.timeout(200) }), (error: unknown) => {
      assert.ok(error instanceof PlantStoreError, String(error))
      assert.equal(error.status, 0)
      assert.equal(error.code, 'TIMEOUT')
      assert.equal((error.cause as Error).name, 'TimeoutError')
      return true
    })
  })

  it('reports a refused connection as NETWORK_ERROR', async () => {
    const nowhere = new PlantStoreClient({ baseUrl: `http://127.0.0.1:${await freePort()}`, token })
    await fails(nowhere.getPlant(1n), { status: 0, code: 'NETWORK_ERROR' })
  })
})
