/** Fuzz: headers, methods, paths and query strings, checked against a real server on each store. */
import fc from 'fast-check'
import { requestBytes } from '../raw-http.js'
import { acceptedCount, checkStored, describeFuzz, sendRaw } from './fuzz-harness.js'

/** Visible ASCII and obs-text, the bytes a header value may hold, plus spaces and tabs. */
const headerText = (maxLength: number) =>
  fc
    .array(fc.oneof(fc.integer({ min: 0x21, max: 0x7e }), fc.constantFrom(0x20, 0x09, 0x80, 0xa0, 0xff)), {
      maxLength,
    })
    .map((codes) => String.fromCharCode(...codes))

const whitespace = fc
  .tuple(fc.constantFrom(' ', '\t', ' \t'), fc.integer({ min: 0, max: 300 }))
  .map(([unit, n]) => unit.repeat(n))

/** Authorization values: odd schemes, whitespace runs, the right token mangled or repeated. */
const authorization = (token: string) =>
  fc.oneof(
    fc.constant(`Bearer ${token}`),
    fc.constantFrom(
      'Basic dXNlcjpwdw==',
      'Bearer',
      'Bearer ',
      'Token x',
      'bearer',
      '',
      'Bearer a b',
      'Digest x',
    ),
    fc.constantFrom('bearer', 'BEARER', 'BeArEr').map((scheme) => `${scheme} ${token}`),
    fc.tuple(whitespace, whitespace, whitespace).map(([a, b, c]) => `${a}Bearer${b || ' '}${token}${c}`),
    fc.tuple(whitespace, fc.string({ maxLength: 20 })).map(([gap, rest]) => `Bearer ${token}${gap}${rest}`),
    headerText(200),
  )

/** Header lines: repeated essentials, random names, long values. */
const extraHeader = (token: string) =>
  fc.oneof(
    authorization(token).map((value): [string, string] => ['Authorization', value]),
    fc.constantFrom<[string, string]>(
      ['Host', 'other'],
      ['Content-Type', 'text/plain'],
      ['Content-Length', '0'],
      ['Transfer-Encoding', 'identity'],
      ['Expect', '100-continue'],
      ['Expect', 'something'],
      ['Connection', 'close, upgrade'],
      ['Upgrade', 'websocket'],
      ['X-Forwarded-For', '1.2.3.4, nonsense'],
      ['X-Request-Id', 'pst_secret?'],
      ['Origin', 'https://evil.example'],
    ),
    fc.tuple(fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,20}$/), headerText(100)),
    fc.integer({ min: 1000, max: 20_000 }).map((n): [string, string] => ['X-Long', 'v'.repeat(n)]),
  )

const METHODS = [
  'GET',
  'HEAD',
  'POST',
  'DELETE',
  'PUT',
  'PATCH',
  'OPTIONS',
  'TRACE',
  'PROPFIND',
  'QUERY',
  'get',
]

/** Request targets: the API's paths, near misses, encodings, traversals and absolute forms. */
const target = fc.oneof(
  fc.constantFrom(
    '/plants',
    '/plants/',
    '/plants/1',
    '/plants/9223372036854775808',
    '/plants/-9223372036854775808',
    '/plants/00000000000000000000000000001',
    '/plants/%31',
    '/plants/%ff',
    '/plants/%',
    '//plants',
    '/plants/../plants',
    '/%2e%2e/plants',
    '/PLANTS',
    '/plants;a=b',
    '/plants/1/x',
    '*',
    'http://x/plants',
    '/healthz',
    '/readyz',
    '/openapi.json',
    '/\u00e9',
  ),
  fc.webPath(),
  fc
    .tuple(fc.constantFrom('/plants/', '/'), fc.string({ maxLength: 120 }))
    .map(([base, rest]) => base + encodeURI(rest)),
)

/** Query strings for the list: bounds, repeats, encodings, a token in the URL. */
const query = fc.oneof(
  fc.constantFrom(
    'limit=0',
    'limit=-1',
    'limit=1001',
    'limit=1e3',
    'limit=00010',
    'limit=',
    'limit=1&limit=2',
    'after=9223372036854775807',
    'after=9223372036854775808',
    'after=-1',
    'tag=',
    'tag=%zz',
    'tag=%00',
    'access_token=x',
    'a[b]=1',
    '&&&',
    '=',
    `tag=${'t'.repeat(5000)}`,
  ),
  fc.webQueryParameters(),
  fc
    .array(fc.tuple(fc.constantFrom('limit', 'after', 'tag', 'x'), fc.string({ maxLength: 20 })), {
      maxLength: 4,
    })
    .map((pairs) => pairs.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&')),
)

const CREATE = '{"id":4242,"name":"fuzz"}'

describeFuzz('headers, methods, paths and queries', (ctx, property) => {
  property(
    'answers any header set with a 2xx or a JSON error, and stores nothing it refused',
    // Built per case: the token exists only once the service runs.
    fc.tuple(
      fc.boolean(),
      fc.constant(null).chain(() => fc.array(extraHeader(ctx.token), { maxLength: 6 })),
    ),
    350,
    async ([withToken, extra]) => {
      const lines: [string, string][] = withToken ? [['Authorization', `Bearer ${ctx.token}`]] : []
      lines.push(['Content-Type', 'application/json'], ['Content-Length', String(CREATE.length)], ...extra)
      const bytes = requestBytes('POST', '/plants', lines, CREATE)
      const answers = await sendRaw(ctx.service.url, bytes, `headers ${JSON.stringify(extra).slice(0, 500)}`)
      await checkStored(ctx.service, ctx.token, acceptedCount(answers))
    },
  )

  property(
    'answers any method, path and query with a 2xx or a JSON error',
    fc.tuple(fc.constantFrom(...METHODS), target, fc.option(query, { nil: undefined }), fc.boolean()),
    350,
    async ([method, path, search, withBody]) => {
      const url = search === undefined ? path : `${path}?${search}`
      const headers: [string, string][] = [['Authorization', `Bearer ${ctx.token}`]]
      if (withBody)
        headers.push(['Content-Type', 'application/json'], ['Content-Length', String(CREATE.length)])
      const bytes = requestBytes(method, url, headers, withBody ? CREATE : '')
      const answers = await sendRaw(ctx.service.url, bytes, `${method} ${url}`, method === 'HEAD' ? 1 : 0)
      await checkStored(ctx.service, ctx.token, method === 'POST' ? acceptedCount(answers) : 0)
    },
  )
})
