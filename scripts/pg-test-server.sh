#!/usr/bin/env bash
# A throwaway PostgreSQL for the storage tests and local development.
#
#   scripts/pg-test-server.sh start DIR PORT   # prints DATABASE_URL as the last line of stdout
#   scripts/pg-test-server.sh stop DIR         # safe to call twice
#
# Typical use:  export TEST_DATABASE_URL="$(scripts/pg-test-server.sh start /tmp/pgtest 55432)"
#
# The cluster lives entirely in DIR (data, unix socket, log), listens on 127.0.0.1:PORT only and
# trusts loopback connections, so it must never hold anything but test data. fsync stays on: the
# tests should see the same durability behaviour as production.
# Progress goes to stderr so that stdout carries only the URL.
set -euo pipefail

DB_NAME=plant_store_test

log() { printf 'pg-test-server: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

usage() {
  cat >&2 <<'EOF'
usage: scripts/pg-test-server.sh start DIR PORT
       scripts/pg-test-server.sh stop DIR
EOF
  exit 2
}

# Prints the directory holding initdb, pg_ctl and postgres. A PATH entry wins (it may be a symlink,
# as on Debian-derived images that link /usr/local/bin/pg_ctl); otherwise the newest Debian install.
find_bindir() {
  local candidate dir
  if candidate="$(command -v pg_ctl 2>/dev/null)" && command -v initdb >/dev/null 2>&1; then
    dir="$(dirname "$(readlink -f "$candidate")")"
    # Debian's pg_wrapper lives in /usr/share/postgresql-common and cannot run a server itself.
    if [[ -x "$dir/postgres" && -x "$dir/initdb" ]]; then
      printf '%s\n' "$dir"
      return 0
    fi
  fi
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [[ -x "$dir/pg_ctl" && -x "$dir/initdb" && -x "$dir/postgres" ]]; then
      printf '%s\n' "$dir"
      return 0
    fi
  done
  return 1
}

install_postgres() {
  command -v apt-get >/dev/null 2>&1 || die "PostgreSQL is not installed and apt-get is unavailable; install PostgreSQL 13+ first"
  local sudo=()
  if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "PostgreSQL is not installed; run as root or install it first"
    sudo=(sudo)
  fi
  log "PostgreSQL not found; installing Debian's postgresql package"
  # Progress to stderr: stdout is reserved for the URL.
  "${sudo[@]}" apt-get update >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y postgresql >&2
}

# PostgreSQL refuses to run as root, so as root every server-side command runs as `postgres`.
as_owner() {
  if [[ "$(id -u)" -eq 0 ]]; then
    if command -v runuser >/dev/null 2>&1; then
      runuser -u postgres -- "$@"
    else
      su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
    fi
  else
    "$@"
  fi
}

is_running() {
  local bindir="$1" data="$2"
  [[ -f "$data/postmaster.pid" ]] && as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1
}

start() {
  local dir="$1" port="$2"
  [[ "$port" =~ ^[0-9]+$ ]] && ((port > 0 && port < 65536)) || die "PORT must be a number between 1 and 65535, got '$port'"

  local bindir
  if ! bindir="$(find_bindir)"; then
    install_postgres
    bindir="$(find_bindir)" || die "PostgreSQL was installed but initdb/pg_ctl are still not found"
  fi
  log "using $bindir ($("$bindir/postgres" --version))"

  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd -P)"
  local data="$dir/data" sock="$dir/sock" logfile="$dir/postgres.log"
  mkdir -p "$sock"
  if [[ "$(id -u)" -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "user 'postgres' does not exist (it comes with the postgresql package)"
    chown -R postgres:postgres "$dir"
    as_owner test -w "$dir" || die "user 'postgres' cannot write to $dir (is a parent directory private?); use a path under /tmp"
  fi
  # Created by the owner: the server appends to it as that user.
  as_owner touch "$logfile"

  if [[ ! -f "$data/PG_VERSION" ]]; then
    log "initialising a cluster in $data"
    # -A trust: initdb's default rules cover only the unix socket and loopback addresses.
    as_owner "$bindir/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C >>"$logfile" 2>&1 ||
      die "initdb failed; see $logfile"
    echo "include_if_exists = 'pg_test_server.conf'" | as_owner tee -a "$data/postgresql.conf" >/dev/null
  fi
  # Rewritten on every start so a second start may pick another port.
  as_owner tee "$data/pg_test_server.conf" >/dev/null <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sock'
max_connections = 200
EOF

  if is_running "$bindir" "$data"; then
    log "already running in $data"
  else
    log "starting on 127.0.0.1:$port"
    if ! as_owner "$bindir/pg_ctl" -D "$data" -l "$logfile" -w -t 60 start >/dev/null; then
      tail -n 20 "$logfile" >&2 || true
      die "the server did not start; see $logfile"
    fi
  fi

  local psql=("$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres)
  if [[ "$("${psql[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")" != 1 ]]; then
    # A natural-language collation, as most production databases have, so that code relying on
    # bytewise text order fails here too. ICU locales need PostgreSQL 15+; older ones get the default.
    "${psql[@]}" -d postgres -c "CREATE DATABASE $DB_NAME TEMPLATE template0 ENCODING 'UTF8'
      LOCALE 'C.UTF-8' LOCALE_PROVIDER icu ICU_LOCALE 'en'" >&2 2>/dev/null ||
      "${psql[@]}" -d postgres -c "CREATE DATABASE $DB_NAME" >&2
    log "created database $DB_NAME"
  fi
  printf 'postgres://postgres@127.0.0.1:%s/%s\n' "$port" "$DB_NAME"
}

stop() {
  local dir="$1"
  local data="$dir/data"
  if [[ ! -f "$data/postmaster.pid" ]]; then
    log "not running ($data has no postmaster.pid)"
    return 0
  fi
  local bindir
  bindir="$(find_bindir)" || die "a server seems to run in $data but pg_ctl is not found"
  if is_running "$bindir" "$data"; then
    as_owner "$bindir/pg_ctl" -D "$data" -m fast -w -t 60 stop >&2
  else
    log "not running (stale postmaster.pid)"
  fi
}

case "${1:-}" in
start)
  [[ $# -eq 3 ]] || usage
  start "$2" "$3"
  ;;
stop)
  [[ $# -eq 2 ]] || usage
  stop "$2"
  ;;
*) usage ;;
esac
