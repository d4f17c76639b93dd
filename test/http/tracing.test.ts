/** OpenTelemetry traces as a collector receives them, and no SDK at all without an endpoint. */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { describe, it } from 'node:test'
import { pathToFileURL } from 'node:url'
import {
  projectRoot,
  serviceEnv,
  spawnService,
  stopService,
  tempDir,
  testStores,
  waitFor,
} from '../helpers.js'
import { request } from '../http-client.js'
import { OtlpReceiver } from '../otlp-receiver.js'
import { setupWebhooks } from './webhook-harness.js'

const SERVER = 2
const CLIENT = 3

for (const store of testStores()) {
  describe(`tracing (${store})`, () => {
    it('sends a span per request, parented by traceparent, with child spans for the store and the webhook send', async (t) => {
      const collector = await OtlpReceiver.start()
      t.after(() => collector.close())
      const ctx = await setupWebhooks(store, t, {
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        OTEL_SERVICE_NAME: 'plant-store-under-test',
        // The test client stands for the proxy whose trace context is believed.
        TRUST_PROXY: '127.0.0.1',
      })
      const receiver = await ctx.receiver()
      await ctx.subscribe(receiver)
      const service = await ctx.start()

      const traceId = randomBytes(16).toString('hex')
      const parentId = randomBytes(8).toString('hex')
      const created = await request('POST', `${service.url}/plants`, {
        token: ctx.token,
        body: '{"id":77,"name":"Traced"}',
        headers: { traceparent: `00-${traceId}-${parentId}-01`, 'x-request-id': 'trace-me-1' },
      })
      assert.equal(created.status, 200, created.text)

      const server = await waitFor('the request span', () =>
        collector.spans.find((span) => span.traceId === traceId && span.kind === SERVER),
      )
      assert.equal(server.parentSpanId, parentId, 'the caller span from traceparent is the parent')
      assert.equal(server.name, 'POST /plants')
      assert.equal(server.attributes['http.route'], '/plants')
      assert.equal(server.attributes['http.response.status_code'], 200)
      assert.equal(server.attributes['plant_store.request_id'], 'trace-me-1')
      assert.equal(server.resource['service.name'], 'plant-store-under-test')

      const storeSpan = await waitFor('the store span', () =>
        collector.spans.find((span) => span.name === 'store createPlant'),
      )
      assert.equal(storeSpan.traceId, traceId)
      assert.equal(storeSpan.parentSpanId, server.spanId, 'the store call is a child of the request')
      assert.equal(storeSpan.kind, CLIENT)

      const send = await waitFor('the webhook send span', () =>
        collector.spans.find((span) => span.name === 'webhook send'),
      )
      assert.equal(send.attributes['http.response.status_code'], 200)
      assert.equal(send.kind, CLIENT)
      const delivery = await waitFor('the delivery span', () =>
        collector.spans.find((span) => span.spanId === send.parentSpanId),
      )
      assert.equal(delivery.name, 'webhook delivery')
      assert.equal(delivery.attributes['plant_store.webhook_id'], receiver.received[0]?.webhookId)
      const recorded = await waitFor('the attempt recorded within the delivery', () =>
        collector.spans.find(
          (span) => span.name === 'store recordAttempt' && span.parentSpanId === delivery.spanId,
        ),
      )
      assert.equal(recorded.traceId, delivery.traceId)
    })
  })
}

describe('trace context from clients', () => {
  it('believes traceparent only from a TRUST_PROXY peer: a client cannot choose the trace, nor hide from it with -00', async (t) => {
    const collector = await OtlpReceiver.start()
    t.after(() => collector.close())
    const tracing = { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '50' }
    /** The span of a GET /healthz sent with `traceparent`, by the request id it carried. */
    const spanOf = async (service: { url: string }, requestId: string, traceparent: string) => {
      const answer = await request('GET', `${service.url}/healthz`, {
        headers: { traceparent, 'x-request-id': requestId },
      })
      assert.equal(answer.status, 200)
      return waitFor(`the span of ${requestId}`, () =>
        collector.spans.find((span) => span.attributes['plant_store.request_id'] === requestId),
      )
    }
    const traceId = randomBytes(16).toString('hex')
    const parentId = randomBytes(8).toString('hex')

    const direct = await spawnService(await serviceEnv('sqlite', tracing))
    try {
      for (const [id, flags] of [
        ['client-unsampled', '00'],
        ['client-sampled', '01'],
      ] as const) {
        const span = await spanOf(direct, id, `00-${traceId}-${parentId}-${flags}`)
        assert.notEqual(span.traceId, traceId, `${id}: a trace of its own`)
        assert.ok(!span.parentSpanId, `${id}: a root span`)
      }
    } finally {
      assert.equal(await stopService(direct), 0)
    }

    const proxied = await spawnService(await serviceEnv('sqlite', { ...tracing, TRUST_PROXY: '127.0.0.1' }))
    try {
      const span = await spanOf(proxied, 'via-proxy', `00-${traceId}-${parentId}-01`)
      assert.equal(span.traceId, traceId)
      assert.equal(span.parentSpanId, parentId)
    } finally {
      assert.equal(await stopService(proxied), 0)
    }
  })
})

describe('tracing off', () => {
  /** The modules the bundle resolved while serving one request, with `extra` in the environment. */
  async function resolvedModules(extra: Record<string, string>): Promise<string[]> {
    const log = path.join(tempDir(), 'imports.log')
    const hook = pathToFileURL(path.join(projectRoot, 'dist/test/fixtures/record-imports.js')).href
    const env = await serviceEnv('sqlite', { ...extra, IMPORT_LOG: log, NODE_OPTIONS: `--import=${hook}` })
    const service = await spawnService(env)
    try {
      assert.equal((await request('GET', `${service.url}/healthz`)).status, 200)
    } finally {
      assert.equal(await stopService(service), 0)
    }
    return readFileSync(log, 'utf8').split('\n')
  }

  it('never imports the OpenTelemetry SDK without OTEL_EXPORTER_OTLP_ENDPOINT, and does with it', async (t) => {
    const collector = await OtlpReceiver.start()
    t.after(() => collector.close())
    const otel = (modules: string[]) => modules.filter((name) => name.startsWith('@opentelemetry/'))

    const without = await resolvedModules({})
    assert.ok(
      without.some((name) => name.endsWith('main.js')),
      'the recorder sees the bundle load',
    )
    assert.deepEqual(otel(without), [])
    assert.ok(!without.includes('pino-pretty'), 'nor pino-pretty for JSON logs')

    const withEndpoint = await resolvedModules({ OTEL_EXPORTER_OTLP_ENDPOINT: collector.url })
    assert.ok(otel(withEndpoint).includes('@opentelemetry/sdk-trace-node'), otel(withEndpoint).join(', '))
  })
})
