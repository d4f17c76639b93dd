/**
 * On SIGTERM the SQLite store closes SQLite's connections before the descriptors the service holds
 * on the store's files (to notice them moved away): closing any descriptor of a file drops the
 * process's POSIX locks on it, which SQLite may still rely on while it closes.
 */
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describe, it } from 'node:test'
import { cliPath, createToken, projectRoot, serviceEnv, skipUnless, waitFor } from '../helpers.js'
import { request } from '../http-client.js'

interface Close {
  file: string
  ours: boolean
}

/** The closes of descriptors on the store's files, in order, from `strace -f -e openat,close`. */
function closesOn(log: string, store: string): Close[] {
  const open = new Map<string, Close>()
  const closes: Close[] = []
  for (const line of log.split('\n')) {
    const opened = /openat\(AT_FDCWD, "([^"]+)", ([A-Z_|]+)(?:, 0\d*)?\) = (\d+)/.exec(line)
    if (opened && opened[1]?.startsWith(store)) {
      // The service's own descriptors are read-only (fs.openSync 'r'); SQLite opens read-write.
      open.set(opened[3] as string, {
        file: path.basename(opened[1]),
        ours: opened[2]?.startsWith('O_RDONLY') === true,
      })
      continue
    }
    const closed = /close\((\d+)/.exec(line)
    const known = closed && open.get(closed[1] as string)
    if (known) {
      closes.push(known)
      open.delete(closed[1] as string)
    }
  }
  return closes
}

const hasStrace = (() => {
  try {
    execFileSync('strace', ['-V'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()

describe('shutdown order (sqlite)', () => {
  const skip = skipUnless(hasStrace, 'strace', 'apt-get install strace')
  it(
    'closes SQLite connections before the service’s own descriptors on the store files',
    { skip },
    async () => {
      const env = await serviceEnv('sqlite')
      const token = await createToken(env, 'shutdown-order')
      const trace = path.join(mkdtempSync(path.join(os.tmpdir(), 'plant-store-strace-')), 'trace.log')
      const child = spawn(
        'strace',
        ['-f', '-qq', '-e', 'trace=openat,close', '-o', trace, process.execPath, cliPath, 'serve'],
        {
          cwd: projectRoot,
          env: { ...process.env, ...env, LOG_LEVEL: 'info' },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      )
      let output = ''
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
      const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()))
      await waitFor('the service to listen', () => /Server listening at/.test(output))
      const url = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)?.[1] as string
      const created = await request('POST', `${url}/plants`, { token, body: { id: 1, name: 'Fern' } })
      assert.equal(created.status, 200)
      // SIGTERM to the service itself, which strace started as its child.
      const pid = Number(
        execFileSync('pgrep', ['-P', String(child.pid)])
          .toString()
          .trim()
          .split('\n')[0],
      )
      process.kill(pid, 'SIGTERM')
      await exited
      const closes = closesOn(readFileSync(trace, 'utf8'), env.PLANT_STORE_DB as string)
      const lastSqlite = closes.map((close) => close.ours).lastIndexOf(false)
      const firstOurs = closes.findIndex((close) => close.ours)
      assert.ok(lastSqlite >= 0 && firstOurs >= 0, JSON.stringify(closes))
      assert.ok(lastSqlite < firstOurs, `closes in order: ${JSON.stringify(closes)}`)
    },
  )
})
