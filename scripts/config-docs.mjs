// Writes the variable tables of docs/configuration.md from src/config/env-schema.ts, between the
// page's `<!-- config-table GROUP -->` markers. Reads the build: run `npm run build` first.
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const { writeConfigurationTables } = await import(path.join(root, 'dist/src/config/env-docs.js'))
const page = path.join(root, 'docs/configuration.md')
const before = readFileSync(page, 'utf8')
const after = writeConfigurationTables(before)
writeFileSync(page, after)
console.log(after === before ? 'docs/configuration.md: up to date' : 'docs/configuration.md: tables written')
