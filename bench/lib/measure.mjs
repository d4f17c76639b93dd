// One measured run: a target under load for a fixed time, with the CPU, memory and machine noise
// around it read from /proc.
import { groupCommitsBetween, readGroupCommits } from './group-commits.mjs'
import { runLoad } from './load.mjs'
import {
  cpuSeconds,
  machineBusySeconds,
  ownCpuSeconds,
  peakRssMb,
  resetPeakRss,
  treeCpuSeconds,
} from './proc.mjs'

/**
 * Drives `server` with `scenario` for `duration` seconds and returns the run's record (see the
 * method in docs/performance.md). `postmasterPid` adds PostgreSQL's CPU to a service on it.
 * Throws if the server died meanwhile.
 */
export async function measureRun({
  server,
  scenario,
  round,
  position,
  connections,
  duration,
  postmasterPid,
}) {
  const token = server.config?.token ?? server.token
  const readMax = server.config?.readMax ?? server.readMax
  const idStep = server.config?.idStep
  const pid = server.proc.pid
  // Only the service has group commits; the yardsticks serve no /metrics.
  const commits0 = server.config ? await readGroupCommits(server.url, token) : undefined
  const peakReset = resetPeakRss(pid)
  const cpu0 = cpuSeconds(pid)
  const db0 = postmasterPid !== undefined ? treeCpuSeconds(postmasterPid) : undefined
  const busy0 = machineBusySeconds()
  const own0 = ownCpuSeconds()
  const t0 = performance.now()
  const result = await runLoad({
    url: server.url,
    scenario,
    token,
    readMax,
    idStep,
    connections,
    duration,
  })
  const wall = (performance.now() - t0) / 1000
  const cpu1 = cpuSeconds(pid)
  const db1 = db0 === undefined ? undefined : treeCpuSeconds(postmasterPid)
  const busy1 = machineBusySeconds()
  const own1 = ownCpuSeconds()
  const groupCommits = groupCommitsBetween(commits0, commits0 && (await readGroupCommits(server.url, token)))
  // CPU that neither the load generator nor the server (nor its PostgreSQL) used: other work.
  const other =
    busy0 === undefined || cpu0 === undefined || cpu1 === undefined
      ? undefined
      : (100 * (busy1 - busy0 - (own1 - own0) - (cpu1 - cpu0) - (db0 === undefined ? 0 : db1 - db0))) / wall
  if (server.proc.exit)
    throw new Error(`${server.id} died during ${scenario}: ${JSON.stringify(server.proc.exit)}`)
  const run = {
    scenario,
    round,
    position,
    target: server.id,
    ...result,
    readMax,
    cpuPercent: cpu0 === undefined || cpu1 === undefined ? undefined : (100 * (cpu1 - cpu0)) / wall,
    dbCpuPercent: db0 === undefined || db1 === undefined ? undefined : (100 * (db1 - db0)) / wall,
    loadGeneratorCpuPercent: (100 * (own1 - own0)) / wall,
    otherCpuPercent: other === undefined ? undefined : Math.max(0, other),
    peakRssMb: peakRssMb(pid),
    peakRssSince: peakReset ? 'run' : 'start',
    groupCommits,
  }
  return run
}
