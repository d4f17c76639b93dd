#!/usr/bin/env bash
# CPU instructions per request of the service, counted by valgrind's callgrind: unlike req/s or
# CPU time, the count barely moves with the machine's load, so two builds or two settings can be
# compared to within about 3% on a shared VM. See docs/performance.md.
#
#   bench/instructions.sh [get|create] [requests]        (build first: npm run build)
#
# Any environment variable passes to the service (e.g. METRICS=false, DATABASE_URL=...); without
# DATABASE_URL it runs on a new SQLite file. SERVICE_BUNDLE picks another build of dist/bundle/main.js.
# YARDSTICK=baseline or YARDSTICK=fastify-reference counts bench/<that>.mjs instead of the service.
# BY_MODULE=1 also prints the main thread's count by module (bench/lib/instructions-by-module.mjs).
# Needs valgrind (Debian: apt-get install -y valgrind). Bounded: the service is killed after 600 s.
set -euo pipefail

SCENARIO="${1:-get}"
REQUESTS="${2:-3000}"
WARMUP=4000
PORT="${BENCH_PORT:-18090}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUNDLE="${SERVICE_BUNDLE:-$ROOT/dist/bundle/main.js}"
WORK="$(mktemp -d)"
PID=""
NODE_PID=""

cleanup() {
  [[ -n "$PID" ]] && kill "$PID" 2>/dev/null || true
  [[ -n "$NODE_PID" ]] && rm -f "/tmp/perf-$NODE_PID.map"
  rm -rf "$WORK"
}
trap cleanup EXIT

case "$SCENARIO" in get | create) ;; *) echo "usage: bench/instructions.sh [get|create] [requests]" >&2; exit 2 ;; esac
BY_MODULE="${BY_MODULE:-}"
case "${YARDSTICK:-}" in '' | baseline | fastify-reference) ;; *) echo "YARDSTICK is baseline or fastify-reference" >&2; exit 2 ;; esac
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install -y valgrind)" >&2; exit 2; }
[[ -f "$BUNDLE" ]] || { echo "$BUNDLE is missing: run npm run build first" >&2; exit 2; }

export PLANT_STORE_DB="${PLANT_STORE_DB:-$WORK/plants.db}" PORT HOST=127.0.0.1 LOG_LEVEL="${LOG_LEVEL:-info}"
# Under valgrind the event loop runs some 50 times slower: load shedding by its delay would refuse requests.
export LOAD_SHED_EVENT_LOOP_DELAY_MS="${LOAD_SHED_EVENT_LOOP_DELAY_MS:-0}"
if [[ -n "${YARDSTICK:-}" ]]; then
  SERVER=("$ROOT/bench/$YARDSTICK.mjs")
  export BENCH_TOKEN=instructions
  echo "$BENCH_TOKEN" >"$WORK/token"
else
  SERVER=("$BUNDLE" serve)
  node "$BUNDLE" tokens create --name instructions >"$WORK/token" 2>/dev/null
fi

# vgdb names its files after HOST and USER; callgrind_control must see the same ones. The server
# runs with npm start's Node flags; BY_MODULE adds V8's perf map (/tmp/perf-PID.map), which names
# the generated code that callgrind sees only by address.
NODE_FLAGS=($(node "$ROOT/scripts/start-node-flags.mjs"))
VALGRIND_FLAGS=()
if [[ -n "$BY_MODULE" ]]; then
  # V8 logs to isolate-*.log in the current folder when it writes a perf map; that goes to WORK.
  NODE_FLAGS+=(--perf-basic-prof --no-logfile-per-isolate "--logfile=$WORK/v8.log")
  VALGRIND_FLAGS+=(--separate-threads=yes)
fi
timeout 600 valgrind --tool=callgrind --vgdb=yes --vgdb-prefix="$WORK/vgdb" --smc-check=all-non-file \
  --callgrind-out-file="$WORK/callgrind.out" "${VALGRIND_FLAGS[@]}" \
  node "${NODE_FLAGS[@]}" "${SERVER[@]}" >"$WORK/service.log" 2>&1 &
PID=$!
for _ in $(seq 1 90); do
  curl -s -m 2 -o /dev/null "http://127.0.0.1:$PORT/healthz" && break
  sleep 2
done
curl -s -m 2 -o /dev/null "http://127.0.0.1:$PORT/healthz" || { tail -5 "$WORK/service.log" >&2; exit 1; }
# valgrind runs node in a process of its own, whose pid names the perf map V8 writes.
[[ -n "$BY_MODULE" ]] && NODE_PID="$(pgrep -P "$PID")"

# Instructions so far, all threads and the main thread, as callgrind_control reports them.
counted() {
  callgrind_control --vgdb-prefix="$WORK/vgdb" -e Ir "$(pgrep -P "$PID")" 2>/dev/null |
    awk '/^ *Th [0-9]+/ { gsub(",", "", $3); all += $3; if ($2 == 1) main = $3 } END { printf "%.0f %.0f\n", all, main }'
}
load() { node "$ROOT/bench/lib/fixed-load.mjs" "$PORT" "$SCENARIO" "$1" "$WORK/token"; }

control() { callgrind_control --vgdb-prefix="$WORK/vgdb" "$@" "$(pgrep -P "$PID")" >/dev/null 2>&1; }

load "$WARMUP" >/dev/null
# BY_MODULE: the counters start from zero, so that the dump holds the measured requests only.
if [[ -n "$BY_MODULE" ]]; then control -z; all0=0 main0=0; else read -r all0 main0 < <(counted); fi
load "$REQUESTS"
read -r all1 main1 < <(counted)
echo "$SCENARIO: $(( (all1 - all0) / REQUESTS )) instructions per request, $(( (main1 - main0) / REQUESTS )) on the main thread"
if [[ -n "$BY_MODULE" ]]; then
  control -d
  # The dump's files are callgrind.out.PART-THREAD; the main thread is thread 01.
  DUMP="$(ls "$WORK"/callgrind.out.*-01 | head -1)"
  node "$ROOT/bench/lib/instructions-by-module.mjs" "$DUMP" "/tmp/perf-$NODE_PID.map" "$BUNDLE" "$REQUESTS"
fi
