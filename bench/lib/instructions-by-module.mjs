// Where the main thread's instructions go, by module, for bench/instructions.sh BY_MODULE=1.
// Usage: node bench/lib/instructions-by-module.mjs CALLGRIND_FILE PERF_MAP BUNDLE REQUESTS
//
// Callgrind names V8's generated code only by address; the perf map that `node --perf-basic-prof`
// writes names it (`JS:*routeHandler file:///...:50558:28`). Each JavaScript function is charged
// its own instructions plus those of the builtins, runtime and native code it calls (inline
// caches, string building, SQLite), but not those of the JavaScript functions they call back
// into: Fastify's hooks call the next hook, so an inclusive cost would nest the whole request.
// A function of the bundle is charged to the module esbuild's `// path` comment puts it in.
import fs from 'node:fs'
import { packageOf } from './packages.mjs'

const [callgrindFile, perfMapFile, bundleFile, requests] = process.argv.slice(2)

/** V8's code objects, sorted by start address. */
function readPerfMap(file) {
  const entries = []
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const match = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line)
    if (match)
      entries.push({
        start: parseInt(match[1], 16),
        end: parseInt(match[1], 16) + parseInt(match[2], 16),
        name: match[3],
      })
  }
  return entries.sort((a, b) => a.start - b.start)
}

function nameAt(entries, address) {
  let low = 0
  let high = entries.length - 1
  let found = -1
  while (low <= high) {
    const middle = (low + high) >> 1
    if (entries[middle].start <= address) {
      found = middle
      low = middle + 1
    } else high = middle - 1
  }
  // Code freed by the GC leaves its entry behind; a later one at the same place wins.
  for (let index = found; index >= 0 && index > found - 50; index--)
    if (address < entries[index].end) return entries[index].name
  return undefined
}

/** Self costs and call arcs (inclusive costs) per function, from callgrind's file format. */
function readCallgrind(file, entries) {
  const names = new Map()
  const self = new Map()
  const arcs = new Map()
  let caller
  let callee
  let inCall = false
  const nameOf = (spec) => {
    const match = /^\((\d+)\)(?: (.*))?$/.exec(spec)
    if (!match) return spec
    if (match[2] !== undefined) {
      const address = /^0x([0-9a-f]+)$/.exec(match[2])
      names.set(match[1], (address && nameAt(entries, parseInt(address[1], 16))) ?? match[2])
    }
    return names.get(match[1])
  }
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('fn=')) caller = nameOf(line.slice(3))
    else if (line.startsWith('cfn=')) callee = nameOf(line.slice(4))
    else if (line.startsWith('calls=')) inCall = true
    else if (/^[0-9+*-]/.test(line)) {
      const cost = Number(line.trim().split(/\s+/)[1] ?? 0)
      if (inCall) {
        let calls = arcs.get(caller)
        if (!calls) arcs.set(caller, (calls = new Map()))
        calls.set(callee, (calls.get(callee) ?? 0) + cost)
        inCall = false
      } else self.set(caller, (self.get(caller) ?? 0) + cost)
    }
  }
  return { self, arcs }
}

const isJavaScript = (name) => /^(JS|RegExp):/.test(name)

/** JavaScript functions' costs, each with the non-JavaScript code below it. */
function chargeJavaScript({ self, arcs }) {
  const functions = new Set([...self.keys(), ...arcs.keys()])
  const inclusive = new Map()
  for (const name of functions) {
    let total = self.get(name) ?? 0
    for (const cost of arcs.get(name)?.values() ?? []) total += cost
    inclusive.set(name, total)
  }
  // The share of a native function's inclusive cost that is not JavaScript it calls back into.
  const ownShare = new Map([...functions].map((name) => [name, 1]))
  for (let round = 0; round < 30; round++)
    for (const name of functions) {
      if (isJavaScript(name)) continue
      let own = self.get(name) ?? 0
      for (const [callee, cost] of arcs.get(name) ?? [])
        if (callee !== name && !isJavaScript(callee)) own += cost * (ownShare.get(callee) ?? 1)
      ownShare.set(name, Math.min(1, own / (inclusive.get(name) || 1)))
    }
  const charged = new Map()
  for (const name of functions) {
    if (!isJavaScript(name)) continue
    let cost = self.get(name) ?? 0
    for (const [callee, arc] of arcs.get(name) ?? [])
      if (!isJavaScript(callee)) cost += arc * (ownShare.get(callee) ?? 1)
    charged.set(name, cost)
  }
  return charged
}

/** The bundle's `// node_modules/x/y.js` and `// dist/src/...` comments, by line. */
function bundleModules(file) {
  const starts = []
  fs.readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, index) => {
      const match = /^\/\/ ((?:node_modules|dist)\/\S+)$/.exec(line)
      if (match) starts.push([index + 1, match[1]])
    })
  return (line) => {
    let module = '(bundle)'
    for (const [start, path] of starts) {
      if (start > line) break
      module = path
    }
    const installed = packageOf(module)
    if (installed) return `node_modules/${installed}`
    return module.replace(/^dist\//, '').replace(/\.js$/, '.ts')
  }
}

function moduleOf(name, bundleModule) {
  if (name.startsWith('RegExp:')) return 'regular expressions (any caller)'
  const inBundle = /main\.js:(\d+):\d+$/.exec(name)
  if (inBundle) return bundleModule(Number(inBundle[1]))
  const installed = packageOf(name)
  if (installed) return `node_modules/${installed}`
  const nodeModule = /node:([\w/]+):\d+:\d+$/.exec(name)?.[1]
  if (!nodeModule) return name.replace(/^JS:[*^~]?\S* /, '').replace(/:\d+:\d+$/, '') || '(unnamed code)'
  if (/^(_http_|net$|internal\/http|internal\/stream_base)/.test(nodeModule)) return 'node: http, net'
  if (/^(internal\/streams|events|internal\/process|internal\/timers|timers)/.test(nodeModule))
    return 'node: streams, events, ticks, timers'
  return `node: ${nodeModule}`
}

const entries = readPerfMap(perfMapFile)
const costs = readCallgrind(callgrindFile, entries)
const charged = chargeJavaScript(costs)
const bundleModule = bundleModules(bundleFile)
const byModule = new Map()
let inJavaScript = 0
for (const [name, cost] of charged) {
  const module = moduleOf(name, bundleModule)
  byModule.set(module, (byModule.get(module) ?? 0) + cost)
  inJavaScript += cost
}
let total = 0
for (const cost of costs.self.values()) total += cost
byModule.set('outside JavaScript (event loop, GC, native callbacks)', total - inJavaScript)

const perRequest = (cost) => Math.round(cost / Number(requests))
console.log(`main thread: ${perRequest(total)} instructions per request, by module:`)
for (const [module, cost] of [...byModule].sort((a, b) => b[1] - a[1]))
  if (perRequest(cost) >= 100) console.log(`${String(perRequest(cost)).padStart(8)}  ${module}`)
