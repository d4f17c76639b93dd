#!/usr/bin/env node
// Writes the document the service serves at GET /openapi.json to a file, for the linters and the
// client's type generator: built by the app factory from dist/src, asked through the route itself.
// Usage: node scripts/dump-openapi.mjs [out-file] (default dist/openapi.json). Run after the build.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const out = path.resolve(process.argv[2] ?? path.join(root, 'dist/openapi.json'))
const { buildApp } = await import(path.join(root, 'dist/src/app.js'))
const { loadConfig } = await import(path.join(root, 'dist/src/config.js'))
const { openStorage } = await import(path.join(root, 'dist/src/storage/open.js'))

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'plant-store-dump-'))
const config = loadConfig({ PLANT_STORE_DB: path.join(dir, 'plants.db'), LOG_LEVEL: 'silent' })
const storage = await openStorage(config)
try {
  const app = await buildApp(config, storage)
  const response = await app.inject({ method: 'GET', url: '/openapi.json' })
  if (response.statusCode !== 200) throw new Error(`GET /openapi.json answered ${response.statusCode}`)
  // Written as served, byte for byte: ids in examples keep every digit.
  fs.writeFileSync(out, response.body)
  await app.close()
} finally {
  await storage.close()
  fs.rmSync(dir, { recursive: true, force: true })
}
