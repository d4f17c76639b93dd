/** Fuzz: what a POST /plants body may hold, checked against a real server on each store. */
import fc from 'fast-check'
import { requestBytes } from '../raw-http.js'
import { acceptedCount, checkStored, describeFuzz, sendRaw } from './fuzz-harness.js'

/** Integer literals at and around the int64 edges, and spellings JSON or int64 does not allow. */
const idLiteral = fc.oneof(
  fc.constantFrom(
    '9223372036854775807',
    '9223372036854775808',
    '-9223372036854775808',
    '-9223372036854775809',
    '18446744073709551616',
    '0',
    '-0',
    '1.0',
    '1e3',
    '1E400',
    '-1e-400',
    '0x10',
    '007',
    '+1',
    '"5"',
    'null',
    'true',
    '[]',
    '{}',
    'NaN',
    'Infinity',
  ),
  fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map(String),
  fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }).map(String),
)

/** Strings as JSON text: ordinary, with escapes and lone surrogates, or raw control characters. */
const stringLiteral = fc.oneof(
  fc.string({ maxLength: 30 }).map((s) => JSON.stringify(s)),
  fc.string({ unit: 'grapheme', maxLength: 30 }).map((s) => JSON.stringify(s)),
  fc.constantFrom(
    '"\\ud800"',
    '"\\udc00x"',
    '"a\\u0000b"',
    '"\u0001"',
    '""',
    '"\\x41"',
    `"${'n'.repeat(300)}"`,
  ),
)

const member = (name: string, value: fc.Arbitrary<string>) => value.map((v) => `"${name}":${v}`)

/** Members a hostile body adds: prototype keys, duplicates, unknown names, deep nesting. */
const extraMember = fc.oneof(
  member('__proto__', fc.constantFrom('{"admin":true}', '{"id":1}', 'null')),
  member('constructor', fc.constantFrom('{"prototype":{"admin":true}}', '1')),
  member('prototype', fc.constant('{}')),
  member('id', idLiteral),
  member('name', stringLiteral),
  member('tag', stringLiteral),
  fc
    .tuple(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 3 }))
    .map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`),
  fc.integer({ min: 1, max: 5000 }).map((depth) => `"deep":${'['.repeat(depth)}${']'.repeat(depth)}`),
)

/** An object whose members are chosen and ordered freely, some of them repeated. */
const plantLike = fc
  .tuple(
    fc.option(member('id', idLiteral), { nil: undefined }),
    fc.option(member('name', stringLiteral), { nil: undefined }),
    fc.option(member('tag', stringLiteral), { nil: undefined }),
    fc.array(extraMember, { maxLength: 4 }),
  )
  .chain(([id, name, tag, extra]) =>
    fc
      .shuffledSubarray(
        [id, name, tag, ...extra].filter((m): m is string => m !== undefined),
        { minLength: 0 },
      )
      .map((members) => `{${members.join(',')}}`),
  )

/** Bytes that are not valid UTF-8: lone continuation, overlong, truncated, surrogate, out of range. */
const badUtf8 = fc.constantFrom(
  [0xff],
  [0x80],
  [0xc0, 0xaf],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xc3],
)

const body = fc.oneof(
  { weight: 5, arbitrary: plantLike.map((text) => Buffer.from(text)) },
  fc.json({ maxDepth: 4 }).map((text) => Buffer.from(text)),
  // A valid create, then a BOM before it or invalid UTF-8 inside its name.
  fc.tuple(fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }), fc.boolean(), badUtf8).map(([id, bom, bad]) => {
    const [head, tail] = [`{"id":${id},"name":"a`, '"}']
    return bom
      ? Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`${head}${tail}`)])
      : Buffer.concat([Buffer.from(head), Buffer.from(bad), Buffer.from(tail)])
  }),
  fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
  fc
    .integer({ min: 1, max: 20_000 })
    .map((depth) => Buffer.from(`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`)),
)

const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constant('application/json') },
  fc.constantFrom(
    'application/json; charset=utf-8',
    'application/json; charset=latin1',
    'text/plain',
    'application/JSON',
    'application/json;;',
    '',
  ),
)

describeFuzz('request bodies', (ctx, property) => {
  property(
    'answers every body with a 2xx or a JSON error, and stores nothing it refused',
    fc.tuple(body, contentType),
    350,
    async ([payload, type]) => {
      const headers: [string, string][] = [
        ['Authorization', `Bearer ${ctx.token}`],
        ['Content-Length', String(payload.length)],
      ]
      if (type !== '') headers.push(['Content-Type', type])
      const head = requestBytes('POST', '/plants', headers)
      const what = `POST ${JSON.stringify(payload.toString('latin1').slice(0, 200))}`
      const answers = await sendRaw(ctx.service.url, [head, payload], what)
      await checkStored(ctx.service, ctx.token, acceptedCount(answers))
    },
  )
})
