// Facts about the machine and checkout a run reports, and what its disk can hold.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import { machineBusySeconds } from './proc.mjs'
import { ROOT, sqliteVersion } from './stores.mjs'

/**
 * Disk a pre-filled plant takes, with room to spare: about 56 bytes in the SQLite file, and in
 * PostgreSQL the heap, both indexes and the WAL written while they are built (measured at 10M).
 */
const BYTES_PER_PLANT = { sqlite: 100, postgres: 300 }
/** Left free on the disk whatever the stores take. */
const DISK_RESERVE_BYTES = 1024 ** 3

/** options.plants, or the most the disk of `dir` holds (in whole millions, thousands below that). */
export function plantsThatFit(dir, options) {
  const { bavail, bsize } = fs.statfsSync(dir)
  const perPlant = options.stores.reduce((sum, store) => sum + BYTES_PER_PLANT[store], 0)
  const fitting = Math.floor((bavail * bsize - DISK_RESERVE_BYTES) / perPlant)
  if (fitting >= options.plants) return options.plants
  const unit = fitting >= 1_000_000 ? 1_000_000 : 1000
  return Math.max(1000, Math.floor(fitting / unit) * unit)
}

export function machine() {
  const cpus = os.cpus()
  return {
    cpuModel: cpus[0]?.model ?? 'unknown',
    cpus: os.availableParallelism?.() ?? cpus.length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    kernel: `${os.type()} ${os.release()}`,
    sqlite: sqliteVersion(),
  }
}

export function gitInfo() {
  const run = (args) => {
    const out = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' })
    return out.status === 0 ? out.stdout.trim() : undefined
  }
  return {
    commit: run(['rev-parse', '--short', 'HEAD']),
    dirty: (run(['status', '--porcelain', 'src']) ?? '') !== '',
  }
}

/** Percent of all `cpus` busy over the next `seconds` (undefined without /proc/stat). */
async function busyPercent(seconds, cpus) {
  const busy0 = machineBusySeconds()
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000))
  const busy1 = machineBusySeconds()
  return busy0 === undefined ? undefined : (100 * (busy1 - busy0)) / seconds / cpus
}

/**
 * How busy the machine is now; with `waitIdleSeconds`, first waits up to that long for it to be
 * idle, meaning three quiet 2 s samples in a row (test suites run in bursts).
 */
export async function busyBeforeRun(cpus, waitIdleSeconds, log) {
  let busy = await busyPercent(1, cpus)
  if (waitIdleSeconds > 0 && busy !== undefined) {
    const waitUntil = performance.now() + waitIdleSeconds * 1000
    let quiet = 0
    while (quiet < 3 && performance.now() < waitUntil) {
      busy = await busyPercent(2, cpus)
      quiet = busy <= 25 ? quiet + 1 : 0
      if (quiet === 0) log(`waiting for the machine to be idle: ${busy.toFixed(0)}% busy`)
    }
  }
  return busy
}
