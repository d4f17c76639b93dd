// The servers a run measures, started on 127.0.0.1 and timed from spawn to their first 200.
import path from 'node:path'
import { freePort, startNode, stopProcess, waitFor200 } from './proc.mjs'
import { median } from './report.mjs'
import { ROOT } from './stores.mjs'

/** A yardstick server from bench/ (the baseline, or the bare-Fastify reference) on a free port. */
export async function startYardstick({ id, script, token, readMax, logDir, cpu }) {
  const port = await freePort()
  const proc = startNode({
    name: id,
    args: [path.join(ROOT, 'bench', script)],
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', BENCH_TOKEN: token },
    logFile: path.join(logDir, `${id}.log`),
    cpu,
  })
  const url = `http://127.0.0.1:${port}`
  const startupMs = await waitFor200(proc, url, '/healthz', 10_000)
  return { id, proc, url, token, readMax, startupMs }
}

/** One start of `cli serve` on `config`'s store, on a free port; times spawn to /healthz and /readyz. */
export async function spawnService({ config, name, cli, nodeArgs, logDir, cpu }) {
  const port = await freePort()
  const proc = startNode({
    name,
    args: [cli, 'serve'],
    nodeArgs,
    env: { ...config.env, PORT: String(port) },
    logFile: path.join(logDir, `${name}.log`),
    cpu,
  })
  const url = `http://127.0.0.1:${port}`
  const healthMs = await waitFor200(proc, url, '/healthz', 30_000)
  const readyMs = await waitFor200(proc, url, '/readyz', 30_000)
  return { proc, url, healthMs, readyMs }
}

/**
 * The service on one store, started three times (two throwaway starts, then the one that serves
 * the rounds); the medians from spawn to /healthz and /readyz answering 200 go into `config`.
 */
export async function startService({ config, cli, nodeArgs, logDir, cpu }) {
  const options = { config, cli, nodeArgs, logDir, cpu }
  const samples = []
  for (let i = 0; i < 2; i++) {
    const started = await spawnService({ ...options, name: `${config.id}-start${i + 1}` })
    samples.push(started)
    await stopProcess(started.proc)
  }
  const { proc, url, healthMs, readyMs } = await spawnService({ ...options, name: config.id })
  samples.push({ healthMs, readyMs })
  config.startupSamplesMs = samples.map((s) => Math.round(s.readyMs))
  config.startupMs = median(samples.map((s) => s.healthMs))
  config.readyMs = median(samples.map((s) => s.readyMs))
  return { id: config.id, proc, url, config }
}
