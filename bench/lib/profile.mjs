// Summarises a V8 .cpuprofile (node --cpu-prof): self time per function and per component.
import fs from 'node:fs'
import path from 'node:path'
import { runLoad } from './load.mjs'
import { packageOf } from './packages.mjs'
import { cpuSeconds, stopProcess } from './proc.mjs'
import { spawnService } from './servers.mjs'
import { ROOT } from './stores.mjs'

const SPECIAL = new Set(['(idle)', '(program)', '(garbage collector)', '(root)'])

/** The component a frame belongs to: a package, node core, the service's own code, or V8/native. */
function componentOf(frame) {
  const { functionName, url } = frame
  if (SPECIAL.has(functionName)) return functionName
  // Code made with new Function (fast-json-stringify serializers, ajv validators) has no url.
  if (!url && /^anonymous\d*$/.test(functionName)) return 'generated code (serializers, validators)'
  if (!url) return 'native / V8 builtins'
  if (url.startsWith('node:')) return 'node core (http, net, streams)'
  const installed = packageOf(url)
  if (installed) return installed
  if (url.includes(ROOT)) return 'service (dist/src)'
  return url
}

function shortLocation(frame) {
  const { url, lineNumber } = frame
  if (!url) return ''
  let where = url.startsWith('file://') ? url.slice('file://'.length) : url
  const modules = where.lastIndexOf('/node_modules/')
  if (modules !== -1) where = where.slice(modules + '/node_modules/'.length)
  else if (where.startsWith(ROOT))
    where = path.relative(ROOT, where).replace(/^\.bench\/run-\d+\/dist\//, 'dist/')
  return `${where}:${lineNumber + 1}`
}

/**
 * Self time per (function, location) and per component, as shares of the samples taken inside
 * the load window and as microseconds per completed request. window = [fromEndUs, toEndUs]: how
 * long before the profile's end the load started and stopped (measured by the caller), so that
 * start-up and shutdown are left out. The (idle) share is time the server waited (for the network
 * or the load generator); an fsync inside better-sqlite3 shows as self time of its native call,
 * since it blocks the JavaScript thread.
 */
export function summarizeProfile(file, { requests, window, top = 15 }) {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8'))
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const from = window ? profile.endTime - window.fromEndUs : profile.startTime
  const to = window ? profile.endTime - window.toEndUs : profile.endTime
  // Samples and their time stamps: startTime plus the running sum of timeDeltas.
  const hits = new Map()
  let at = profile.startTime
  let total = 0
  let sampledUs = 0
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0
    at += delta
    if (at < from || at > to) continue
    const id = profile.samples[i]
    hits.set(id, (hits.get(id) ?? 0) + 1)
    total++
    sampledUs += Math.max(0, delta)
  }
  const usPerHit = total ? sampledUs / total : 0
  const byFunction = new Map()
  const byComponent = new Map()
  for (const [id, count] of hits) {
    const frame = byId.get(id)?.callFrame
    if (!frame) continue
    const name = frame.functionName || '(anonymous)'
    const location = shortLocation(frame)
    const component = componentOf(frame)
    const key = `${name}\u0000${location}`
    const entry = byFunction.get(key) ?? { name, location, component, hits: 0 }
    entry.hits += count
    byFunction.set(key, entry)
    byComponent.set(component, (byComponent.get(component) ?? 0) + count)
  }
  const idleHits = byComponent.get('(idle)') ?? 0
  const busyHits = total - idleHits
  const share = (n) => (total ? (100 * n) / total : 0)
  const perRequest = (n) => (requests ? (n * usPerHit) / requests : 0)
  const rows = (entries) =>
    entries
      .sort((a, b) => b.hits - a.hits)
      .map((e) => ({ ...e, percent: share(e.hits), usPerRequest: perRequest(e.hits) }))
  return {
    file: path.relative(ROOT, file),
    windowSeconds: (to - from) / 1e6,
    samples: total,
    requests,
    busyPercent: share(busyHits),
    busyUsPerRequest: perRequest(busyHits),
    components: rows([...byComponent].map(([name, n]) => ({ name, hits: n }))),
    functions: rows([...byFunction.values()].filter((e) => e.name !== '(idle)')).slice(0, top),
  }
}

/**
 * Profiles a fresh service per scenario: `cli serve` under `--cpu-prof` (one file per thread),
 * 1 s of warm-up, then `seconds` of load; each thread's profile is summarised over the loaded
 * window only, so start-up and shutdown do not count.
 */
export async function recordProfiles({
  config,
  scenarios,
  cli,
  nodeArgs,
  profDir,
  logDir,
  cpu,
  connections,
  seconds,
  log,
}) {
  const profiles = []
  for (const scenario of scenarios) {
    // One directory per scenario: Node writes one profile per thread (main, and any worker).
    const dir = path.join(profDir, scenario)
    fs.mkdirSync(dir, { recursive: true })
    const { proc, url } = await spawnService({
      config,
      name: `profile-${scenario}`,
      cli,
      nodeArgs: [...nodeArgs, '--cpu-prof', '--cpu-prof-dir', dir],
      logDir,
      cpu,
    })
    const common = {
      url,
      scenario,
      token: config.token,
      readMax: config.readMax,
      idStep: config.idStep,
      connections,
    }
    await runLoad({ ...common, duration: 1 })
    const cpu0 = cpuSeconds(proc.pid)
    const loadStart = performance.now()
    const result = await runLoad({ ...common, duration: seconds })
    const loadEnd = performance.now()
    const cpu1 = cpuSeconds(proc.pid)
    await stopProcess(proc)
    const exitAt = performance.now()
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))
    if (files.length === 0) log(`profile ${scenario}: no profile written`)
    for (const file of files.sort()) {
      // CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile; thread 0 is the main thread.
      const threadId = Number(file.split('.').at(-3))
      const summary = summarizeProfile(path.join(dir, file), {
        requests: result.ok,
        window: { fromEndUs: (exitAt - loadStart) * 1000, toEndUs: (exitAt - loadEnd) * 1000 },
      })
      const thread = threadId === 0 ? 'main thread' : `worker thread ${threadId}`
      profiles.push({
        scenario,
        config: config.id,
        thread,
        rps: result.rps,
        processCpuPercent: (100 * (cpu1 - cpu0)) / ((loadEnd - loadStart) / 1000),
        ...summary,
      })
      log(
        `profile ${scenario} (${thread}): ${Math.round(result.rps)} req/s, ` +
          `${Math.round(summary.busyUsPerRequest)} µs CPU/request`,
      )
    }
  }
  return profiles
}
