#!/usr/bin/env node
// The Node flags `npm start` gives the service (package.json's start script), so that whatever
// else starts it (the benchmark, nginx-demo.sh) runs it the same way. Run directly, it prints them
// separated by spaces.
import fs from 'node:fs'
import { fileURLToPath } from 'node:url'

const packageJson = new URL('../package.json', import.meta.url)

export function startNodeFlags() {
  const start = JSON.parse(fs.readFileSync(packageJson, 'utf8')).scripts.start
  return start.split(/\s+/).filter((word) => word.startsWith('--'))
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  process.stdout.write(`${startNodeFlags().join(' ')}\n`)
