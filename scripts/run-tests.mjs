#!/usr/bin/env node
// Runs every compiled test file with node:test. It names the files itself because `node --test DIR`
// finds nothing on Node 22 and later, and Node 20 takes no glob; the arguments pass through.
//   node scripts/run-tests.mjs [node --test options...] [-- file or folder under dist/test ...]
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'

const separator = process.argv.indexOf('--')
const options = separator === -1 ? process.argv.slice(2) : process.argv.slice(2, separator)
const roots = separator === -1 ? ['dist/test'] : process.argv.slice(separator + 1)

const files = roots.flatMap((root) =>
  fs.statSync(root).isFile()
    ? [root]
    : fs
        .readdirSync(root, { recursive: true })
        .map((name) => path.join(root, String(name)))
        .filter((file) => file.endsWith('.test.js')),
)
// Sorted, so that zz-openapi-coverage.test.js comes last when files run one at a time.
files.sort()
if (files.length === 0) {
  console.error(`run-tests: no *.test.js file under ${roots.join(', ')}: run npm run build first`)
  process.exit(1)
}
const run = spawnSync(process.execPath, ['--test', ...options, ...files], { stdio: 'inherit' })
process.exit(run.status ?? 1)
