#!/usr/bin/env bash
# Three Plant Store instances behind nginx, all on loopback, using deploy/nginx.conf as it is
# (only its ports and access log path are rewritten). Runs until SIGINT/SIGTERM, then stops
# everything it started.
#
#   npm run build
#   export DATABASE_URL=postgres://...        # or PLANT_STORE_DB=/path/to/plants.db (SQLite)
#   scripts/nginx-demo.sh                     # nginx on 127.0.0.1:8080, instances on 8081-8083
#
#   TOKEN=$(npm run --silent cli -- tokens create --name demo)   # same DATABASE_URL / PLANT_STORE_DB
#   curl -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
#        -d '{"id":1,"name":"Monstera"}' http://127.0.0.1:8080/plants
#
# Environment:
#   DATABASE_URL / PLANT_STORE_DB   the store every instance shares (default: SQLite in DEMO_DIR)
#   NGINX_PORT                      nginx's port (default 8080)
#   INSTANCE_PORTS                  the instances' ports (default "8081 8082 8083"; exactly three)
#   DEMO_DIR                        where logs, pid files and the rendered config go (default: mktemp)
#   NGINX_DEMO_NO_INSTALL=1         fail instead of installing Debian's nginx when it is missing
#
# Each instance logs to DEMO_DIR/instance-N.log and writes DEMO_DIR/instance-N.pid; nginx's access
# log is DEMO_DIR/access.log. Progress goes to stderr; one line "ready http://127.0.0.1:PORT" on
# stdout says everything is up.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd -P)"
cli="$root/dist/bundle/main.js"
# The instances run with the Node flags `npm start` uses (heap sizing; see docs/operations.md, "Memory").
read -r -a node_flags <<<"$(node "$root/scripts/start-node-flags.mjs")"
nginx_port="${NGINX_PORT:-8080}"
read -r -a ports <<<"${INSTANCE_PORTS:-8081 8082 8083}"

log() { printf 'nginx-demo: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

[[ ${#ports[@]} -eq 3 ]] || die "INSTANCE_PORTS must name exactly three ports, got '${INSTANCE_PORTS:-}'"
[[ -f "$cli" ]] || die "$cli is missing: run 'npm run build' first"

find_nginx() {
  command -v nginx 2>/dev/null && return 0
  [[ -x /usr/sbin/nginx ]] && echo /usr/sbin/nginx && return 0
  return 1
}

if ! nginx_bin="$(find_nginx)"; then
  [[ -z "${NGINX_DEMO_NO_INSTALL:-}" ]] || die "nginx is not installed"
  command -v apt-get >/dev/null 2>&1 || die "nginx is not installed and apt-get is unavailable"
  sudo=()
  [[ "$(id -u)" -eq 0 ]] || sudo=(sudo)
  log "nginx not found; installing Debian's nginx package"
  "${sudo[@]}" apt-get update >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y nginx >&2
  nginx_bin="$(find_nginx)" || die "nginx was installed but is still not found"
fi

demo_dir="${DEMO_DIR:-$(mktemp -d /tmp/plant-store-nginx-demo.XXXXXX)}"
mkdir -p "$demo_dir/nginx/logs"
demo_dir="$(cd "$demo_dir" && pwd -P)"
# nginx's worker processes drop to an unprivileged user when started as root; let them reach it.
chmod 755 "$demo_dir" "$demo_dir/nginx"

if [[ -z "${DATABASE_URL:-}" ]]; then
  export PLANT_STORE_DB="${PLANT_STORE_DB:-$demo_dir/plants.db}"
  log "store: SQLite file $PLANT_STORE_DB (three processes on one file: one machine only)"
else
  log "store: PostgreSQL from DATABASE_URL"
fi

pids=()
nginx_pid=""
cleanup() {
  trap - EXIT INT TERM
  # nginx first (SIGQUIT: graceful), so no request reaches an instance that is going away.
  if [[ -n "$nginx_pid" ]] && kill -0 "$nginx_pid" 2>/dev/null; then
    kill -QUIT "$nginx_pid" 2>/dev/null || true
  fi
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}" ${nginx_pid:+"$nginx_pid"}; do
    # Each instance drains within SHUTDOWN_TIMEOUT_MS (10 s by default).
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  log "stopped"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# Migrate once before three processes start (they could also do it concurrently: migrations lock).
node "$cli" migrate >&2

for i in 0 1 2; do
  n=$((i + 1))
  PORT="${ports[$i]}" HOST=127.0.0.1 TRUST_PROXY=127.0.0.1 LOG_LEVEL="${LOG_LEVEL:-info}" \
    node "${node_flags[@]}" "$cli" serve >"$demo_dir/instance-$n.log" 2>&1 &
  pids+=("$!")
  echo "$!" >"$demo_dir/instance-$n.pid"
done

# The config as shipped, with this run's ports and log path.
conf="$demo_dir/nginx/plant-store.conf"
sed -e "s|listen 127.0.0.1:8080;|listen 127.0.0.1:$nginx_port;|" \
  -e "s|server 127.0.0.1:8081 |server 127.0.0.1:${ports[0]} |" \
  -e "s|server 127.0.0.1:8082 |server 127.0.0.1:${ports[1]} |" \
  -e "s|server 127.0.0.1:8083 |server 127.0.0.1:${ports[2]} |" \
  -e "s|access_log /var/log/nginx/plant-store.access.log|access_log $demo_dir/access.log|" \
  "$root/deploy/nginx.conf" >"$conf"
for expected in "listen 127.0.0.1:$nginx_port;" "server 127.0.0.1:${ports[2]} " "access_log $demo_dir/access.log"; do
  grep -qF "$expected" "$conf" || die "deploy/nginx.conf changed shape: could not set '$expected'"
done
# A minimal main config around it; all paths under the demo prefix, none of the system's.
cat >"$demo_dir/nginx/nginx.conf" <<EOF
worker_processes 2;
pid $demo_dir/nginx/nginx.pid;
error_log $demo_dir/nginx/logs/error.log warn;
events { worker_connections 1024; }
http {
    client_body_temp_path $demo_dir/nginx/client_body;
    proxy_temp_path $demo_dir/nginx/proxy;
    fastcgi_temp_path $demo_dir/nginx/fastcgi;
    uwsgi_temp_path $demo_dir/nginx/uwsgi;
    scgi_temp_path $demo_dir/nginx/scgi;
    include $conf;
}
EOF

# Every instance answers /readyz before nginx takes traffic.
for i in 0 1 2; do
  ready=""
  for _ in $(seq 1 150); do
    kill -0 "${pids[$i]}" 2>/dev/null || die "instance $((i + 1)) exited; see $demo_dir/instance-$((i + 1)).log"
    if node -e "fetch('http://127.0.0.1:${ports[$i]}/readyz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"; then
      ready=1
      break
    fi
    sleep 0.1
  done
  [[ -n "$ready" ]] || die "instance $((i + 1)) not ready after 15 s; see $demo_dir/instance-$((i + 1)).log"
done

"$nginx_bin" -p "$demo_dir/nginx" -c "$demo_dir/nginx/nginx.conf" -e "$demo_dir/nginx/logs/error.log" -t >&2
"$nginx_bin" -p "$demo_dir/nginx" -c "$demo_dir/nginx/nginx.conf" -e "$demo_dir/nginx/logs/error.log" \
  -g 'daemon off;' &
nginx_pid="$!"
for _ in $(seq 1 100); do
  if node -e "fetch('http://127.0.0.1:$nginx_port/healthz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"; then
    log "nginx on 127.0.0.1:$nginx_port -> instances on ${ports[*]}; logs in $demo_dir"
    if [[ -n "${DATABASE_URL:-}" ]]; then
      log "a token for this store: DATABASE_URL='$DATABASE_URL' npm run --silent cli -- tokens create --name demo"
    else
      log "a token for this store: PLANT_STORE_DB='$PLANT_STORE_DB' npm run --silent cli -- tokens create --name demo"
    fi
    echo "ready http://127.0.0.1:$nginx_port"
    # Runs until nginx exits or a signal arrives (the trap then cleans up).
    wait "$nginx_pid" || true
    die "nginx exited; see $demo_dir/nginx/logs/error.log"
  fi
  kill -0 "$nginx_pid" 2>/dev/null || die "nginx did not start; see $demo_dir/nginx/logs/error.log"
  sleep 0.1
done
die "nginx did not answer on 127.0.0.1:$nginx_port"
