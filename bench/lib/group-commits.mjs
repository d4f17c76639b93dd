// The service's group commits during one run, read from its /metrics before and after: how long
// a commit took and how many creates shared one (see docs/performance.md).

const SERIES = {
  commits: 'plant_store_group_commit_duration_seconds_count',
  seconds: 'plant_store_group_commit_duration_seconds_sum',
  writes: 'plant_store_group_commit_batch_size_sum',
}

/**
 * The counters now, or undefined when the service serves no metrics here (METRICS=false,
 * METRICS_PORT). `token` has the metrics:read scope (lib/stores.mjs).
 */
export async function readGroupCommits(url, token) {
  let text
  try {
    const response = await fetch(`${url}/metrics`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(5000),
    })
    if (!response.ok) return undefined
    text = await response.text()
  } catch {
    return undefined
  }
  const lines = text.split('\n')
  const values = {}
  for (const [key, name] of Object.entries(SERIES)) {
    const line = lines.find((l) => l.startsWith(`${name} `))
    if (line === undefined) return undefined
    values[key] = Number(line.slice(name.length + 1))
  }
  return values
}

/** What happened between two readings; undefined when either is missing or nothing was committed. */
export function groupCommitsBetween(before, after) {
  if (!before || !after) return undefined
  const commits = after.commits - before.commits
  if (!(commits > 0)) return undefined
  return {
    meanCommitMs: ((after.seconds - before.seconds) / commits) * 1000,
    writesPerCommit: (after.writes - before.writes) / commits,
  }
}
