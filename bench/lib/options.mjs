// The benchmark's command line: its usage text, its options checked and defaulted, and the plan's
// expected length (for the watchdog). A bad option exits 2 with the usage.
import { parseArgs } from 'node:util'
import { SCENARIOS } from './load.mjs'

const USAGE = `Usage: node bench/run.mjs [options]        (build first: npm run build)

  --quick               SQLite only, empty store, create-seq/get-id/list-100, 3 rounds of 1.5 s (< 1 min)
  --duration S          seconds per measured run (default 1.5)
  --warmup S            seconds of unrecorded load per target before each scenario (default 0.75; quick 0.5)
  --rounds N            interleaved rounds per scenario (default 3)
  --connections N       concurrent connections (default 64)
  --scenarios LIST      ${Object.keys(SCENARIOS).join(',')} (default: all)
  --stores LIST         sqlite,postgres (default: both)
  --sizes LIST          empty,big (default: both)
  --plants N            plants pre-filled in the "big" stores (default 10000000, the issue's size;
                        fewer, with a warning, when the temporary folder's disk cannot hold them)
  --big                 with --quick, also measure the big stores (the default run always does)
  --read-seed N         plants added to the empty stores before the read scenarios (default 10000)
  --reference           also measure bench/fastify-reference.mjs, the baseline's routes on bare Fastify
                        (schema validation, no store), to show what the framework alone costs
  --profile             also record a CPU profile of the service under each selected scenario (SQLite)
  --profile-seconds S   load per profile (default 5)
  --sqlite-sync MODE    full (fsync per commit, default) or normal
  --log-level LEVEL     the service's LOG_LEVEL (default info, as shipped: one line per request); at
                        info, SQLite's empty store is measured again at warn, in rows of their own:
                        the difference is the cost of the request log
  --node-flags="FLAGS"  Node flags for the service instead of those of \`npm start\` (to compare them)
  --max-time S          watchdog: kill everything and exit 3 after S seconds (default: from the plan)
  --wait-idle S         first wait up to S seconds for the machine to be idle (3 x 2 s under 25% busy)
  --no-pin              do not pin load generator and servers to separate CPUs with taskset
  --keep                keep the temporary directory (stores, logs)
  --report FILE         only print the Markdown report of a saved .bench/results-*.json again

Environment variables other than PORT, HOST, PLANT_STORE_DB, DATABASE_URL, LOG_LEVEL and
SQLITE_SYNC pass through to the service (e.g. DB_POOL_SIZE).`

export function parseOptions() {
  // A bad flag is a wrong command line like any other: exit 2 with the usage, not a stack trace.
  try {
    return readOptions()
  } catch (error) {
    if (error?.code?.startsWith?.('ERR_PARSE_ARGS')) usage(error.message)
    throw error
  }
}

function readOptions() {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      rounds: { type: 'string' },
      connections: { type: 'string' },
      scenarios: { type: 'string' },
      stores: { type: 'string' },
      sizes: { type: 'string' },
      plants: { type: 'string' },
      big: { type: 'boolean', default: false },
      'read-seed': { type: 'string' },
      reference: { type: 'boolean', default: false },
      profile: { type: 'boolean', default: false },
      'profile-seconds': { type: 'string' },
      'sqlite-sync': { type: 'string' },
      'log-level': { type: 'string' },
      'node-flags': { type: 'string' },
      'max-time': { type: 'string' },
      'wait-idle': { type: 'string' },
      'no-pin': { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      report: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  })
  if (values.help) {
    process.stdout.write(`${USAGE}\n`)
    process.exit(0)
  }
  const quick = values.quick
  const number = (name, fallback, min, max) => {
    const raw = values[name]
    if (raw === undefined) return fallback
    const value = Number(raw)
    if (!Number.isFinite(value) || value < min || value > max)
      usage(`--${name} must be a number from ${min} to ${max}`)
    return value
  }
  const list = (name, fallback, allowed) => {
    const items = (values[name] ?? fallback.join(','))
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
    const unknown = items.filter((item) => !allowed.includes(item))
    if (unknown.length || items.length === 0) usage(`--${name} takes a list of ${allowed.join(', ')}`)
    return [...new Set(items)]
  }
  const options = {
    quick,
    // 1.5 s runs keep `npm run bench`, build included, under 5 minutes on a busy machine (a probe
    // measured 5m39s with 2 s runs at load average 3-8).
    duration: number('duration', 1.5, 0.5, 600),
    warmup: number('warmup', quick ? 0.5 : 0.75, 0, 60),
    rounds: Math.round(number('rounds', 3, 1, 50)),
    connections: Math.round(number('connections', 64, 1, 10_000)),
    scenarios: list(
      'scenarios',
      quick ? ['create-seq', 'get-id', 'list-100'] : Object.keys(SCENARIOS),
      Object.keys(SCENARIOS),
    ),
    stores: list('stores', quick ? ['sqlite'] : ['sqlite', 'postgres'], ['sqlite', 'postgres']),
    sizes: list('sizes', quick && !values.big ? ['empty'] : ['empty', 'big'], ['empty', 'big']),
    plants: Math.round(number('plants', 10_000_000, 1, 1e9)),
    readSeed: Math.round(number('read-seed', 10_000, 1, 1e8)),
    reference: values.reference,
    profile: values.profile,
    profileSeconds: number('profile-seconds', 5, 1, 120),
    sqliteSync: values['sqlite-sync'] ?? 'full',
    logLevel: values['log-level'] ?? 'info',
    nodeFlags: values['node-flags'],
    maxTime: values['max-time'] === undefined ? undefined : number('max-time', 0, 10, 86_400),
    waitIdle: number('wait-idle', 0, 0, 3600),
    pin: !values['no-pin'],
    keep: values.keep,
    report: values.report,
  }
  if (!['full', 'normal'].includes(options.sqliteSync)) usage('--sqlite-sync must be full or normal')
  return options
}

function usage(message) {
  process.stderr.write(`bench: ${message}\n\n${USAGE}\n`)
  process.exit(2)
}

/** Seconds the plan should take, for the watchdog and the log. */
export function estimateSeconds(options, targets) {
  const runs = options.scenarios.length * options.rounds * targets
  const loadSeconds =
    runs * (options.duration + 0.15) + options.scenarios.length * targets * (options.warmup + 0.15)
  const prefill = options.sizes.includes('big')
    ? (options.plants / 10_000_000) * (options.stores.includes('postgres') ? 45 : 20)
    : 0
  const profile = options.profile ? options.scenarios.length * (options.profileSeconds + 3) : 0
  return loadSeconds + prefill + profile + 3.5 * targets + 5
}
