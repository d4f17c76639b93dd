import http from 'node:http'
import type { AddressInfo } from 'node:net'

/** One span as OTLP/HTTP JSON carries it, with its attributes as plain values. */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId: string
  name: string
  kind: number
  attributes: Record<string, string | number | boolean | undefined>
  status: { code?: number; message?: string }
  resource: Record<string, string | number | boolean | undefined>
}

interface AnyValue {
  stringValue?: string
  intValue?: string | number
  boolValue?: boolean
  doubleValue?: number
}
type KeyValues = { key: string; value: AnyValue }[] | undefined

const plain = (attributes: KeyValues) =>
  Object.fromEntries(
    (attributes ?? []).map(({ key, value }) => [
      key,
      value.stringValue ??
        (value.intValue === undefined ? undefined : Number(value.intValue)) ??
        value.boolValue ??
        value.doubleValue,
    ]),
  )

interface ExportRequest {
  resourceSpans?: {
    resource?: { attributes?: KeyValues }
    scopeSpans?: { spans?: (Omit<ReceivedSpan, 'attributes' | 'resource'> & { attributes?: KeyValues })[] }[]
  }[]
}

/** A collector's OTLP/HTTP endpoint, JSON encoding only: POST /v1/traces. */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = []
  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<OtlpReceiver> {
    const server = http.createServer()
    const receiver = new OtlpReceiver(server)
    server.on('request', (req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => {
        if (req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
          res.writeHead(415).end()
          return
        }
        receiver.take(JSON.parse(Buffer.concat(chunks).toString('utf8')) as ExportRequest)
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
    return receiver
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  private take(request: ExportRequest): void {
    for (const resourceSpans of request.resourceSpans ?? []) {
      const resource = plain(resourceSpans.resource?.attributes)
      for (const scope of resourceSpans.scopeSpans ?? []) {
        for (const span of scope.spans ?? [])
          this.spans.push({ ...span, attributes: plain(span.attributes), resource })
      }
    }
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
