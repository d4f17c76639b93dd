// A run's results: completed with their summary rows and target verdicts, saved, and printed.
import fs from 'node:fs'
import path from 'node:path'
import { evaluateTargets, markdown, summarize } from './report.mjs'

function complete(results) {
  results.rows = summarize(results)
  results.targets = evaluateTargets(results, results.rows)
  return markdown(results)
}

/**
 * Writes `results` to `outDir` as results-<start time>.json (everything, re-renderable with
 * --report) and .md, and as latest.md; prints the Markdown. Returns the JSON file's path.
 */
export function publishResults(results, outDir) {
  const md = complete(results)
  const stamp = results.startedAt.replace(/[:.]/g, '-')
  const jsonFile = path.join(outDir, `results-${stamp}.json`)
  fs.writeFileSync(jsonFile, `${JSON.stringify(results, null, 2)}\n`)
  fs.writeFileSync(path.join(outDir, `results-${stamp}.md`), `${md}\n`)
  fs.writeFileSync(path.join(outDir, 'latest.md'), `${md}\n`)
  process.stdout.write(`\n${md}\n\n`)
  return jsonFile
}

/** `--report FILE`: a saved run rendered again with the current report code. */
export function printSavedReport(file) {
  const results = JSON.parse(fs.readFileSync(file, 'utf8'))
  process.stdout.write(`${complete(results)}\n`)
}
