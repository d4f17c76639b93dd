/**
 * Fuzz: message framing over raw sockets (chunked bodies, Content-Length mismatches, conflicting
 * framing headers, HTTP versions, pipelining, writes split anywhere), on each store.
 */
import fc from 'fast-check'
import { acceptedCount, checkStored, describeFuzz, sendRaw } from './fuzz-harness.js'

type Framing =
  | { kind: 'length'; delta: number }
  | {
      kind: 'chunked'
      cuts: number[]
      upper: boolean
      extension: boolean
      trailer: boolean
      badSize?: string
    }
  | { kind: 'both' }
  | { kind: 'encoding'; value: string }
  | { kind: 'none' }

const framing: fc.Arbitrary<Framing> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<Framing>({ kind: 'length', delta: 0 }) },
  fc.integer({ min: -10, max: 10 }).map((delta): Framing => ({ kind: 'length', delta })),
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('chunked' as const),
      cuts: fc.array(fc.integer({ min: 1, max: 30 }), { maxLength: 5 }),
      upper: fc.boolean(),
      extension: fc.boolean(),
      trailer: fc.boolean(),
      badSize: fc.option(fc.constantFrom('zz', '-1', '0x5', 'ffffffffffffffffff', ' 5', '5 ', ''), {
        nil: undefined,
      }),
    }),
  },
  fc.constant<Framing>({ kind: 'both' }),
  fc
    .constantFrom(
      'gzip, chunked',
      'xchunked',
      'chunked, chunked',
      'chunked, identity',
      ' chunked',
      'CHUNKED',
      'identity',
    )
    .map((value): Framing => ({ kind: 'encoding', value })),
  fc.constant<Framing>({ kind: 'none' }),
)

const VERSIONS = [
  'HTTP/1.1',
  'HTTP/1.1',
  'HTTP/1.1',
  'HTTP/1.0',
  'HTTP/1.2',
  'HTTP/2.0',
  'HTTP/0.9',
  'http/1.1',
]

/** The body in chunks cut at `cuts`, in hex (upper or lower case), with extensions and trailers. */
function chunked(body: string, f: Extract<Framing, { kind: 'chunked' }>): string {
  const parts: string[] = []
  let rest = body
  for (const cut of f.cuts) {
    if (rest === '') break
    parts.push(rest.slice(0, cut))
    rest = rest.slice(cut)
  }
  if (rest !== '') parts.push(rest)
  const size = (n: number) => (f.upper ? n.toString(16).toUpperCase() : n.toString(16))
  const ext = f.extension ? ';name=value' : ''
  const chunks = parts.map(
    (part, i) => `${i === 0 && f.badSize !== undefined ? f.badSize : size(part.length)}${ext}\r\n${part}\r\n`,
  )
  return `${chunks.join('')}0\r\n${f.trailer ? 'X-Trailer: 1\r\n' : ''}\r\n`
}

interface Message {
  id: bigint
  version: string
  framing: Framing
  keepAlive: boolean
  expect: boolean
}

function messageBytes(m: Message, token: string): string {
  const body = `{"id":${m.id},"name":"framing"}`
  const lines = [
    `POST /plants ${m.version}`,
    'Host: x',
    `Authorization: Bearer ${token}`,
    'Content-Type: application/json',
  ]
  if (m.keepAlive) lines.push('Connection: keep-alive')
  if (m.expect) lines.push('Expect: 100-continue')
  const f = m.framing
  let payload = body
  if (f.kind === 'length') lines.push(`Content-Length: ${Math.max(0, body.length + f.delta)}`)
  else if (f.kind === 'chunked') {
    lines.push('Transfer-Encoding: chunked')
    payload = chunked(body, f)
  } else if (f.kind === 'both') {
    lines.push(`Content-Length: ${body.length}`, 'Transfer-Encoding: chunked')
    payload = chunked(body, { kind: 'chunked', cuts: [], upper: false, extension: false, trailer: false })
  } else if (f.kind === 'encoding') {
    lines.push(`Transfer-Encoding: ${f.value}`)
    payload = chunked(body, { kind: 'chunked', cuts: [], upper: false, extension: false, trailer: false })
  }
  return `${lines.join('\r\n')}\r\n\r\n${payload}`
}

const message = fc.record({
  id: fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }),
  version: fc.constantFrom(...VERSIONS),
  framing,
  keepAlive: fc.boolean(),
  expect: fc.boolean(),
})

/** Cuts a byte stream into writes at the given points. */
function split(bytes: string, points: number[]): string[] {
  const sorted = [...new Set(points.map((p) => p % (bytes.length + 1)))].sort((a, b) => a - b)
  const writes: string[] = []
  let from = 0
  for (const point of sorted) {
    writes.push(bytes.slice(from, point))
    from = point
  }
  writes.push(bytes.slice(from))
  return writes.filter((w) => w !== '')
}

describeFuzz('message framing', (ctx, property) => {
  property(
    'answers pipelined, oddly framed requests in JSON, and stores no more than it accepted',
    fc.tuple(fc.array(message, { minLength: 1, maxLength: 4 }), fc.array(fc.nat(2000), { maxLength: 4 })),
    350,
    async ([messages, cuts]) => {
      const bytes = messages.map((m) => messageBytes(m, ctx.token)).join('')
      const what = `framing ${JSON.stringify(bytes.replaceAll(ctx.token, '<token>')).slice(0, 1500)}`
      const answers = await sendRaw(ctx.service.url, split(bytes, cuts), what)
      await checkStored(ctx.service, ctx.token, acceptedCount(answers))
    },
  )
})
