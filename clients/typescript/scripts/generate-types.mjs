#!/usr/bin/env node
// Writes src/generated/openapi.ts from the served document (default: ../../dist/openapi.json,
// written by the server's scripts/dump-openapi.mjs). The client test fails when they drift.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { generateTypes } from './types-from-document.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
const input = path.resolve(process.argv[2] ?? path.join(here, '../../../dist/openapi.json'))
const output = path.join(here, '../src/generated/openapi.ts')
fs.mkdirSync(path.dirname(output), { recursive: true })
fs.writeFileSync(output, await generateTypes(fs.readFileSync(input, 'utf8')))
console.log(`wrote ${path.relative(process.cwd(), output)} from ${input}`)
