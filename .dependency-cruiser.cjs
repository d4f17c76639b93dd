/**
 * The layers of src/ (docs/development.md#layout), checked by `npm run lint`. The CLI and app.ts
 * put the layers together and may import any of them.
 * @type {import('dependency-cruiser').IConfiguration}
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'A cycle makes neither module loadable, testable or replaceable alone.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'routes-not-to-adapters',
      severity: 'error',
      comment: 'Routes speak to the Storage port; only app.ts or the CLI chooses an adapter.',
      from: { path: '^src/routes/' },
      to: { path: '^src/storage/(sqlite|postgres)/' },
    },
    {
      name: 'storage-not-to-http',
      severity: 'error',
      comment: 'HTTP objects never reach storage.',
      from: { path: '^src/storage/' },
      to: { path: '^src/(http|routes)/' },
    },
    {
      name: 'http-not-to-routes',
      severity: 'error',
      comment: 'The protocol and the checks serve every route and know none.',
      from: { path: '^src/http/' },
      to: { path: '^src/routes/' },
    },
    {
      name: 'observability-not-to-http-or-webhooks',
      severity: 'error',
      comment: 'Logs, metrics and tracing are used by http/ and webhooks/, never the other way.',
      from: { path: '^src/observability/' },
      to: { path: '^src/(http|webhooks)/' },
    },
    {
      name: 'config-is-a-leaf',
      severity: 'error',
      comment: 'Every layer reads the config; the config reads none of them.',
      from: { path: '^src/config(\\.ts$|/)' },
      to: { path: '^src/(http|routes|auth|observability|storage|webhooks|openapi|cli)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a cycle through types is still a cycle of the design.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
}
