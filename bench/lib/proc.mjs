// Child processes for the benchmark: start, wait until healthy, measure (CPU, peak RSS), stop.
// Every child is tracked so that an exit, a signal or the watchdog can kill them all.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

const children = new Set()

const CLK_TCK = (() => {
  const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' })
  const value = Number(out.stdout?.trim())
  return Number.isFinite(value) && value > 0 ? value : 100
})()

export function hasTaskset() {
  if (process.platform !== 'linux') return false
  return spawnSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' }).status === 0
}

/** Pins every thread of this process (the load generator) to one CPU. */
export function pinSelf(cpu) {
  return (
    spawnSync('taskset', ['-a', '-p', '-c', String(cpu), String(process.pid)], { stdio: 'ignore' }).status ===
    0
  )
}

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

/**
 * Spawns `node ...args` (optionally under `taskset -c cpu`, which execs, so the pid is node's),
 * stdout and stderr appended to logFile.
 */
export function startNode({ name, args, env, logFile, cpu, nodeArgs = [] }) {
  const out = fs.openSync(logFile, 'a')
  let command = process.execPath
  let argv = [...nodeArgs, ...args]
  if (cpu !== undefined) {
    argv = ['-c', String(cpu), command, ...argv]
    command = 'taskset'
  }
  const startedAt = performance.now()
  const child = spawn(command, argv, { env, stdio: ['ignore', out, out] })
  fs.closeSync(out)
  children.add(child)
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      children.delete(child)
      resolve({ code, signal })
    })
    child.once('error', (error) => {
      children.delete(child)
      resolve({ code: null, signal: null, error })
    })
  })
  const proc = { name, child, pid: child.pid, logFile, exited, startedAt, exit: undefined }
  exited.then((result) => {
    proc.exit = result
  })
  return proc
}

export function logTail(file, lines = 20) {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
  } catch {
    return '(no log)'
  }
}

/** GET on a fresh connection (no agent, so no socket stays open); resolves to the status code. */
export function httpStatus(url, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const request = http.get(url, { agent: false, timeout: timeoutMs }, (response) => {
      response.resume()
      response.on('end', () => resolve(response.statusCode ?? 0))
    })
    request.on('timeout', () => request.destroy(new Error('timeout')))
    request.on('error', () => resolve(0))
  })
}

/**
 * Polls `path` every 5 ms until it answers 200; resolves to the milliseconds since the spawn.
 * Throws with the log's tail when the process dies or the deadline passes.
 */
export async function waitFor200(proc, baseUrl, path, timeoutMs) {
  const deadline = performance.now() + timeoutMs
  while (performance.now() < deadline) {
    if (proc.exit)
      throw new Error(`${proc.name} exited (${JSON.stringify(proc.exit)}):\n${logTail(proc.logFile)}`)
    if ((await httpStatus(`${baseUrl}${path}`, 500)) === 200) return performance.now() - proc.startedAt
    await sleep(5)
  }
  throw new Error(`${proc.name} did not answer ${path} within ${timeoutMs} ms:\n${logTail(proc.logFile)}`)
}

/** SIGTERM, then SIGKILL after graceMs; resolves once the process is gone. */
export async function stopProcess(proc, graceMs = 10_000) {
  if (proc.exit) return proc.exit
  proc.child.kill('SIGTERM')
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), graceMs)
  const result = await proc.exited
  clearTimeout(timer)
  return result
}

/** Registers a child started elsewhere (e.g. the pre-fill) so that killAllChildren reaches it. */
export function track(child) {
  children.add(child)
  child.once('exit', () => children.delete(child))
  return child
}

export function killAllChildren() {
  for (const child of children) {
    try {
      child.kill('SIGKILL')
    } catch {
      // already gone: nothing left to stop
    }
  }
}

function statFields(pid) {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name may hold spaces and parentheses: split after the last ')'.
    return text.slice(text.lastIndexOf(')') + 2).split(' ')
  } catch {
    return undefined
  }
}

/** User + system CPU seconds used so far by pid (Linux), or undefined. */
export function cpuSeconds(pid) {
  const fields = statFields(pid)
  if (!fields) return undefined
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK
}

/** CPU seconds of a process and its direct children (PostgreSQL's postmaster and backends). */
export function treeCpuSeconds(rootPid) {
  let total = cpuSeconds(rootPid)
  if (total === undefined) return undefined
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    const fields = statFields(entry)
    if (fields && Number(fields[1]) === rootPid) total += (Number(fields[11]) + Number(fields[12])) / CLK_TCK
  }
  return total
}

/** Resets the kernel's peak-RSS mark (VmHWM) to the current RSS; false where not allowed. */
export function resetPeakRss(pid) {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5')
    return true
  } catch {
    return false
  }
}

/** Peak resident set size in MiB since start or the last reset (Linux VmHWM), or undefined. */
export function peakRssMb(pid) {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match ? Number(match[1]) / 1024 : undefined
  } catch {
    return undefined
  }
}

/** CPU seconds all CPUs of the machine spent busy so far (Linux /proc/stat), or undefined. */
export function machineBusySeconds() {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]
    const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number)
    return (user + nice + system + irq + softirq + (steal || 0)) / CLK_TCK
  } catch {
    return undefined
  }
}

/** CPU seconds this process (the load generator) has used. */
export function ownCpuSeconds() {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1e6
}
