#!/usr/bin/env node
// Bundles the compiled service (dist/src, from tsc) into dist/bundle: main.js, the CLI and server
// that `npm start` runs, and writer-thread.js, the SQLite writer's thread, which the bundle finds
// next to itself as dist/src finds it. Why: Node 20 resolves, reads and links about 500 files at
// every start (fastify alone some 130), half the time to /readyz; one file starts in about half
// the time. better-sqlite3 stays outside, as a native addon must, and so do @fastify/swagger-ui,
// which serves files from its package, and the packages only some services load (below).
// Run by `npm run build` after tsc; takes well under a second.
import fs from 'node:fs'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const root = fileURLToPath(new URL('..', import.meta.url))
const outdir = `${root}dist/bundle`

// Nothing stale may survive a rebuild next to the bundle.
fs.rmSync(outdir, { recursive: true, force: true })
await build({
  entryPoints: {
    main: `${root}dist/src/cli/main.js`,
    'writer-thread': `${root}dist/src/storage/sqlite/writer-thread.js`,
  },
  outdir,
  bundle: true,
  platform: 'node',
  format: 'esm',
  // main.js stays one file: split into chunks, the server's code runs 9-20% more CPU instructions
  // per read (bench/instructions.sh). A dynamic import() still runs its modules only when called.
  target: 'node20',
  // Swagger UI reads its page's files from its own folder (__dirname), which a bundle has not;
  // pg-native is pg's optional native binding, which this service does not use. OpenTelemetry
  // and pino-pretty are imported only when asked for (OTEL_EXPORTER_OTLP_ENDPOINT,
  // LOG_FORMAT=pretty): left outside, they cost a service that does not use them nothing.
  // jsonc-parser's main file is a UMD module whose require() calls esbuild cannot follow.
  external: [
    'better-sqlite3',
    '@fastify/swagger-ui',
    'pg-native',
    'pino-pretty',
    '@opentelemetry/*',
    'jsonc-parser',
  ],
  // Most dependencies are CommonJS and call require(); an ES module has none of its own.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module';\nconst require = __createRequire(import.meta.url);",
  },
  logLevel: 'warning',
})

// esbuild escapes every non-ASCII character of the code (charset ascii) but keeps the few in
// dependencies' comments, and one such character makes Node decode and V8 scan the whole file as
// two-byte text: the same escape in those comments makes each start some 25 ms cheaper.
for (const file of ['main.js', 'writer-thread.js']) {
  const bundled = fs.readFileSync(`${outdir}/${file}`, 'utf8')
  const ascii = bundled.replace(
    /[^\x00-\x7f]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )
  if (ascii !== bundled) fs.writeFileSync(`${outdir}/${file}`, ascii)
}
