/**
 * Failover under create load on a two-node streaming cluster (deploy/pg-cluster.sh), started here:
 * two `serve` processes, clients recording every acknowledged create, and four faults of the
 * primary. docs/high-availability.md holds the figures and the bounds asserted here.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync } from 'node:fs'
import path from 'node:path'
import { after, before, describe, it, type TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { loadConfig } from '../../src/config.js'
import {
  suiteRunsHere,
  createToken,
  freePort,
  projectRoot,
  type SpawnedService,
  spawnService,
  stopService,
  tempDir,
  waitFor,
} from '../helpers.js'
import { pgAdmin } from '../pg-admin.js'
import { CreateLoad } from './create-load.js'
import { Router } from './router.js'

const clusterScript = path.join(projectRoot, 'deploy/pg-cluster.sh')
const DB = 'plant_store_test'
/** The service's deadline for a store call is DB_STATEMENT_TIMEOUT_MS + 1 s (docs/postgresql.md). */
const STATEMENT_TIMEOUT_MS = 1_000
const DEADLINE_MS = STATEMENT_TIMEOUT_MS + 1_000
/** Scheduling slack on the shared 2-core machine between the service's deadline and the client. */
const ANSWER_SLACK_MS = 1_500
/** From the end of the promote to a 200 on every instance, without a restart. */
const RECOVERY_BOUND_MS = 10_000
/** How long a fault lasts before the promote: an HA manager's detection time. */
const DETECTION_MS = 1_000
/** A freeze outlasts the request deadline, so requests meet a server that never answers. */
const FREEZE_MS = 3_000
const CLIENTS_PER_INSTANCE = 3
/** 200s each instance answers before a fault and after its recovery. */
const STEADY_OKS = 40
/** Room for a slow CI machine to answer them; not a speed bound. */
const STEADY_WAIT_MS = 60_000

function cluster(...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', [clusterScript, ...args], { timeout: 180_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`pg-cluster.sh ${args.join(' ')} failed: ${stderr}`))
      else resolve(stdout)
    })
  })
}

const singleHostUrl = (port: number) => `postgres://postgres@127.0.0.1:${port}/${DB}`

/** Whether this build's config takes libpq's multi-host form; if not, the suite routes through a Router. */
function acceptsMultiHost(url: string): boolean {
  try {
    loadConfig({ DATABASE_URL: url })
    return true
  } catch {
    return false
  }
}

function alive(pid: number): boolean {
  try {
    // A killed process nobody has reaped yet is a zombie: gone.
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(' ')[2] !== 'Z'
  } catch {
    return false
  }
}

/**
 * Every live process of the server in `dataDir`: those whose working directory it is. PostgreSQL
 * gives each backend a session of its own, so the postmaster's process group is the postmaster alone.
 */
function serverPids(dataDir: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        return readlinkSync(`/proc/${name}/cwd`) === dataDir
      } catch {
        return false
      }
    })
    .map(Number)
    .filter(alive)
}

function signal(pids: number[], name: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, name)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
    }
  }
}

/** Stops the postmaster first, so that it forks no backend between the listing and the signal. */
function signalServer(dataDir: string, postmaster: number, name: 'SIGSTOP' | 'SIGKILL'): number[] {
  signal([postmaster], 'SIGSTOP')
  const pids = serverPids(dataDir)
  signal(pids, name)
  return pids
}

interface Figures {
  mode: string
  fault: string
  acked: number
  lost: number
  unavailable: number
  faultToPromotedS: number
  faultToFirst200S: number
  promotedToFirst200S: number
  longestGapS: number
  slowestMs: number
}

const hasPostgres =
  existsSync('/usr/lib/postgresql') ||
  !!process.env.PATH?.split(':').some((dir) => existsSync(`${dir}/pg_ctl`))

for (const mode of ['sync', 'async'] as const) {
  if (
    !suiteRunsHere(
      `failover on a two-node ${mode} cluster`,
      hasPostgres,
      'PostgreSQL server binaries',
      'install Debian postgresql; deploy/pg-cluster.sh runs the cluster',
    )
  ) {
    continue
  }
  describe(`failover on a two-node ${mode} cluster under create load`, { timeout: 600_000 }, () => {
    const dir = tempDir(`plant-store-ha-${mode}-`)
    const ports: Record<1 | 2, number> = { 1: 0, 2: 0 }
    let primary: 1 | 2 = 1
    let router: Router | undefined
    let instances: SpawnedService[] = []
    let token: string
    let nextId = 1

    const other = (node: 1 | 2): 1 | 2 => (node === 1 ? 2 : 1)
    const dataDir = (node: 1 | 2) => path.join(realpathSync(dir), `node${node}`, 'data')
    const postmasterPid = (node: 1 | 2) =>
      Number(readFileSync(path.join(dataDir(node), 'postmaster.pid'), 'utf8').split('\n')[0])

    before(async () => {
      ports[1] = await freePort()
      ports[2] = await freePort()
      const [multiHost] = (await cluster('start', dir, String(ports[1]), String(ports[2]), mode)).split('\n')
      assert.match(
        multiHost ?? '',
        /^postgres:\/\/postgres@127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\/\w+\?target_session_attrs=read-write$/,
      )
      let databaseUrl = multiHost as string
      if (!acceptsMultiHost(databaseUrl)) {
        router = await Router.start(ports[1])
        databaseUrl = singleHostUrl(router.port)
      }
      const env = {
        DATABASE_URL: databaseUrl,
        PORT: '0',
        DB_POOL_SIZE: '4',
        DB_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
      }
      token = await createToken(env, 'failover')
      instances = [await spawnService(env), await spawnService(env)]
    })

    after(async () => {
      for (const instance of instances) await stopService(instance, 5_000)
      await router?.close()
      await cluster('stop', dir).catch(() => {})
      rmSync(dir, { recursive: true, force: true })
    })

    /**
     * Runs create load, applies `fault` (which ends once the new primary is promoted), waits for
     * every instance to answer 200 again, then checks every acknowledged create on the new primary.
     */
    async function underLoad(t: TestContext, fault: string, inject: () => Promise<void>): Promise<Figures> {
      const load = new CreateLoad(
        instances.map((instance) => instance.url),
        token,
        CLIENTS_PER_INSTANCE,
        () => nextId++,
      )
      let figures: Figures
      try {
        const started = performance.now()
        await waitFor(
          'creates answered 200 on every instance before the fault',
          () => instances.every((_, i) => load.oksSince(i, started) >= STEADY_OKS),
          STEADY_WAIT_MS,
        )
        const faultAt = performance.now()
        await inject()
        primary = other(primary)
        router?.repoint(ports[primary])
        const promotedAt = performance.now()
        // Recovered: every instance answered 200 to a request sent after the promote.
        const recoveredAt = await waitFor(
          'a 200 on every instance after the promote',
          () => load.recoveredAt(promotedAt),
          RECOVERY_BOUND_MS,
        )
        await waitFor(
          'steady 200s on every instance after the failover',
          () => instances.every((_, i) => load.oksSince(i, recoveredAt) >= STEADY_OKS),
          STEADY_WAIT_MS,
        )
        await load.stop()
        const admin = pgAdmin(singleHostUrl(ports[primary]))
        let found: number
        try {
          const rows =
            await admin`SELECT count(*)::int AS n FROM plants WHERE id = ANY(${load.acked.map(String)}::int8[])`
          found = Number(rows[0]?.n)
        } finally {
          await admin.end()
        }
        figures = {
          mode,
          fault,
          acked: load.acked.length,
          lost: load.acked.length - found,
          unavailable: load.unavailableCount,
          faultToPromotedS: Math.round(promotedAt - faultAt) / 1000,
          faultToFirst200S: Math.round(recoveredAt - faultAt) / 1000,
          promotedToFirst200S: Math.round(recoveredAt - promotedAt) / 1000,
          longestGapS: Math.round(load.longestGapMs()) / 1000,
          slowestMs: Math.round(load.slowestMs),
        }
      } finally {
        await load.stop()
      }
      t.diagnostic(`figures ${JSON.stringify({ ...figures, codes: Object.fromEntries(load.unavailable) })}`)
      assert.deepEqual(load.violations.slice(0, 10), [], 'every answer but a 200 is a 503 with Retry-After')
      assert.ok(
        figures.slowestMs <= DEADLINE_MS + ANSWER_SLACK_MS,
        `a request took ${figures.slowestMs} ms; the request deadline is ${DEADLINE_MS} ms`,
      )
      for (const instance of instances) assert.equal(instance.child.exitCode, null, 'no instance restarted')
      return figures
    }

    /** Brings the fenced node back as the standby, so the next fault meets two nodes again. */
    async function rejoin(): Promise<void> {
      await cluster('rejoin', dir, String(other(primary)))
    }

    it('kill -9 of the primary', async (t) => {
      const figures = await underLoad(t, 'kill -9', async () => {
        // Every process at once, as when the machine dies.
        signalServer(dataDir(primary), postmasterPid(primary), 'SIGKILL')
        await sleep(DETECTION_MS)
        await cluster('promote', dir, String(other(primary)))
      })
      if (mode === 'sync')
        assert.equal(figures.lost, 0, 'no acknowledged create lost with synchronous replication')
      else t.diagnostic(`async replication: ${figures.lost} of ${figures.acked} acknowledged creates lost`)
      await rejoin()
    })

    if (mode === 'async') return

    it('fast stop of the primary', async (t) => {
      const figures = await underLoad(t, 'fast stop', async () => {
        const pid = postmasterPid(primary)
        // SIGINT is PostgreSQL's fast shutdown: sessions end, the shutdown checkpoint reaches the standby.
        process.kill(pid, 'SIGINT')
        await waitFor('the primary to stop', () => !alive(pid))
        await sleep(DETECTION_MS)
        await cluster('promote', dir, String(other(primary)))
      })
      assert.equal(figures.lost, 0)
      await rejoin()
    })

    it('freeze of the primary (SIGSTOP), promote with fencing, thaw (SIGCONT)', async (t) => {
      const frozen = primary
      let pids: number[] = []
      const figures = await underLoad(t, 'freeze', async () => {
        pids = signalServer(dataDir(frozen), postmasterPid(frozen), 'SIGSTOP')
        await sleep(FREEZE_MS)
        await cluster('promote', dir, String(other(frozen)))
        signal(pids, 'SIGCONT')
      })
      assert.equal(figures.lost, 0)
      // Fenced: the thawed node is gone and cannot take a write.
      assert.deepEqual(pids.filter(alive), [])
      const old = pgAdmin(singleHostUrl(ports[frozen]))
      await assert.rejects(old`CREATE TABLE fenced_write (x int)`, { code: 'ECONNREFUSED' })
      await old.end()
      await rejoin()
    })

    it('switchover: clean stop of the primary, promote, the old primary rejoins as standby', async (t) => {
      const figures = await underLoad(t, 'switchover', async () => {
        await cluster('promote', dir, String(other(primary)))
      })
      assert.equal(figures.lost, 0)
      await rejoin()
      const status = await cluster('status', dir)
      assert.match(status, new RegExp(`node${primary} \\S+ primary`))
      assert.match(status, /replica node\d streaming sync/)
    })
  })
}
