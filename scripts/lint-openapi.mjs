#!/usr/bin/env node
// Lints the served document (written by dump-openapi.mjs) with Redocly (recommended, redocly.yaml)
// and Spectral (spectral:oas, .spectral.yaml); any error or warning from either fails.
// Usage: node scripts/lint-openapi.mjs [file] (default dist/openapi.json).
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const file = path.resolve(process.argv[2] ?? path.join(root, 'dist/openapi.json'))
const bin = (name) => path.join(root, 'node_modules/.bin', name)
// No telemetry or update check: the lint runs offline and says nothing about us to anyone.
const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' }

function run(command, args) {
  const result = spawnSync(command, args, { cwd: root, env, encoding: 'utf8', maxBuffer: 64 << 20 })
  if (result.error) throw result.error
  return result
}

const redocly = run(bin('redocly'), ['lint', '--config', 'redocly.yaml', '--format', 'json', file])
const redoclyTotals = JSON.parse(redocly.stdout).totals
const spectral = run(bin('spectral'), ['lint', '-r', '.spectral.yaml', '-f', 'json', '--quiet', file])
const spectralResults = JSON.parse(spectral.stdout || '[]')
// Spectral severities: 0 error, 1 warning, 2 info, 3 hint.
const count = (severity) => spectralResults.filter((result) => result.severity === severity).length

const counts = {
  redocly: { errors: redoclyTotals.errors, warnings: redoclyTotals.warnings },
  spectral: { errors: count(0), warnings: count(1) },
}
console.log(
  `redocly (recommended): ${counts.redocly.errors} errors, ${counts.redocly.warnings} warnings; ` +
    `spectral (spectral:oas): ${counts.spectral.errors} errors, ${counts.spectral.warnings} warnings`,
)
if (Object.values(counts).some(({ errors, warnings }) => errors + warnings > 0)) {
  for (const result of spectralResults)
    console.error(`spectral ${result.code}: ${result.message} at ${result.path.join('.')}`)
  if (redoclyTotals.errors + redoclyTotals.warnings > 0) console.error(redocly.stdout)
  process.exit(1)
}
