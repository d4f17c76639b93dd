// A node:test reporter for scripts/run-tests.mjs: writes one JSON document with every skipped test
// or suite (file, name, reason) and each file's test time (the sum of its top-level durations).
export default async function* summary(source) {
  const skipped = []
  const fileMs = {}
  let failed = 0
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue
    const { name, nesting, file, skip, details } = event.data
    if (event.type === 'test:fail') failed++
    if (skip !== undefined) skipped.push({ file, name, reason: skip === true ? '' : String(skip) })
    if (nesting === 0 && file) fileMs[file] = (fileMs[file] ?? 0) + (details?.duration_ms ?? 0)
  }
  yield JSON.stringify({ skipped, fileMs, failed })
}
