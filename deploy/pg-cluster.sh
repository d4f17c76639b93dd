#!/usr/bin/env bash
# A local two-node PostgreSQL streaming-replication cluster: the topology of docs/high-availability.md
# and of the failover suite (test/ha/failover.test.ts).
#
#   deploy/pg-cluster.sh start DIR PORT1 PORT2 [sync|async]  # node1 primary on PORT1, node2 standby on PORT2
#   deploy/pg-cluster.sh promote DIR NODE    # fence the other node, then promote NODE (1 or 2)
#   deploy/pg-cluster.sh rejoin DIR NODE     # attach a fenced or stopped NODE as the standby (pg_rewind)
#   deploy/pg-cluster.sh status DIR          # each node: port, running or not, role, replication
#   deploy/pg-cluster.sh stop DIR            # both nodes; safe to call twice
#
# `start` prints two lines on stdout: the multi-host DATABASE_URL (target_session_attrs=read-write)
# and the standby's single-host URL. Progress goes to stderr. A second `start` restarts the nodes in
# the roles they had.
#
# Fencing: `promote` first makes sure the other node cannot take writes again. It stops it (fast
# shutdown, up to PG_CLUSTER_FENCE_SECONDS, default 5 s); a node that does not stop in time, is
# frozen (SIGSTOP) or has lost its postmaster is killed with SIGKILL, every process of it. Then it
# leaves standby.signal in the fenced node's data directory, so that a plain `pg_ctl start` brings
# it back read-only, never as a second primary. `rejoin` rewinds it onto the new primary's timeline
# and streams again.
#
# Sync mode: the primary has synchronous_standby_names = the standby and synchronous_commit = on,
# so a commit is acknowledged only once the standby has flushed it. A promoted node has no standby
# until `rejoin`: its synchronous_standby_names is empty and it acknowledges commits alone.
#
# Everything lives in DIR, listens on 127.0.0.1 only and trusts loopback connections: test data
# only. fsync stays on.
set -euo pipefail

DB_NAME="${PG_CLUSTER_DB:-plant_store_test}"
FENCE_SECONDS="${PG_CLUSTER_FENCE_SECONDS:-5}"

log() { printf 'pg-cluster: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

usage() {
  cat >&2 <<'EOF'
usage: deploy/pg-cluster.sh start DIR PORT1 PORT2 [sync|async]
       deploy/pg-cluster.sh promote DIR NODE
       deploy/pg-cluster.sh rejoin DIR NODE
       deploy/pg-cluster.sh status DIR
       deploy/pg-cluster.sh stop DIR
EOF
  exit 2
}

# The directory holding initdb, pg_ctl, postgres and pg_basebackup: a PATH entry, or the newest
# Debian install (Debian's pg_wrapper in /usr/share/postgresql-common cannot run a server).
find_bindir() {
  local candidate dir
  if candidate="$(command -v pg_ctl 2>/dev/null)"; then
    dir="$(dirname "$(readlink -f "$candidate")")"
    if [[ -x "$dir/postgres" && -x "$dir/pg_basebackup" && -x "$dir/pg_rewind" ]]; then
      printf '%s\n' "$dir"
      return 0
    fi
  fi
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [[ -x "$dir/pg_ctl" && -x "$dir/initdb" && -x "$dir/pg_basebackup" && -x "$dir/pg_rewind" ]]; then
      printf '%s\n' "$dir"
      return 0
    fi
  done
  die "PostgreSQL 13+ server binaries not found (install Debian's postgresql, or put pg_ctl on PATH)"
}

# PostgreSQL refuses to run as root, so as root every server-side command runs as `postgres`.
as_owner() {
  if [[ "$(id -u)" -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

BIN=""
DIR=""
# Reads DIR/cluster.env (PORT1, PORT2, MODE) written by the first `start`.
load() {
  DIR="$(cd "$1" 2>/dev/null && pwd -P)" || die "no cluster in $1"
  [[ -f "$DIR/cluster.env" ]] || die "no cluster in $DIR (cluster.env missing)"
  # shellcheck disable=SC1091
  source "$DIR/cluster.env"
  BIN="$(find_bindir)"
}

data_of() { printf '%s/node%s/data' "$DIR" "$1"; }
port_of() { if [[ "$1" == 1 ]]; then printf '%s' "$PORT1"; else printf '%s' "$PORT2"; fi; }
peer_of() { if [[ "$1" == 1 ]]; then printf 2; else printf 1; fi; }
check_node() { [[ "$1" == 1 || "$1" == 2 ]] || die "NODE must be 1 or 2, got '$1'"; }

psql_node() {
  local node="$1"
  shift
  "$BIN/psql" -X -q -tA -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(port_of "$node")" -U postgres "$@"
}

# The postmaster's pid if it is alive, else nothing.
postmaster_pid() {
  local pidfile pid
  pidfile="$(data_of "$1")/postmaster.pid"
  [[ -f "$pidfile" ]] || return 0
  pid="$(head -n 1 "$pidfile")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 0
  # A killed postmaster whose parent has not reaped it yet is a zombie: gone for our purposes.
  [[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" == Z ]] || printf '%s' "$pid"
}

# Writes the settings this script owns; the data directory's postgresql.conf includes the file.
# ROLE is primary or standby; SYNC_NAME the standby a primary waits for in sync mode ('' for none).
write_conf() {
  local node="$1" role="$2" sync_name="$3" peer
  peer="$(peer_of "$node")"
  {
    printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s/node%s/sock'\n" \
      "$(port_of "$node")" "$DIR" "$node"
    printf "max_connections = 200\nwal_level = replica\nmax_wal_senders = 10\nwal_keep_size = '512MB'\n"
    # pg_rewind needs hint bits logged (or data checksums) to rewind a fenced primary.
    printf "wal_log_hints = on\nhot_standby = on\nfsync = on\nsynchronous_commit = on\n"
    printf "cluster_name = 'node%s'\n" "$node"
    printf "synchronous_standby_names = '%s'\n" "$sync_name"
    if [[ "$role" == standby ]]; then
      printf "primary_conninfo = 'host=127.0.0.1 port=%s user=postgres application_name=node%s'\n" \
        "$(port_of "$peer")" "$node"
    fi
  } | as_owner tee "$(data_of "$node")/pg_cluster.conf" >/dev/null
}

# The standby a primary waits for: its peer in sync mode, nobody in async mode.
sync_name_for() { if [[ "$MODE" == sync ]]; then printf 'node%s' "$(peer_of "$1")"; fi; }

start_node() {
  local node="$1" data logfile
  data="$(data_of "$node")"
  logfile="$DIR/node$node/postgres.log"
  if [[ -n "$(postmaster_pid "$node")" ]]; then
    log "node$node already running"
    return 0
  fi
  log "starting node$node on 127.0.0.1:$(port_of "$node")"
  if ! as_owner "$BIN/pg_ctl" -D "$data" -l "$logfile" -w -t 60 start >/dev/null; then
    tail -n 20 "$logfile" >&2 || true
    die "node$node did not start; see $logfile"
  fi
}

# Waits until the node answers as the given role (primary: not in recovery).
wait_role() {
  local node="$1" role="$2" want i
  if [[ "$role" == primary ]]; then want=f; else want=t; fi
  for ((i = 0; i < 600; i++)); do
    if [[ "$(psql_node "$node" -d postgres -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" == "$want" ]]; then
      return 0
    fi
    sleep 0.1
  done
  die "node$node did not become $role within 60 s; see $DIR/node$node/postgres.log"
}

is_standby() { [[ -f "$(data_of "$1")/standby.signal" ]]; }

# The node that is (or, stopped, was last) the primary: the one without standby.signal.
primary_node() {
  if ! is_standby 1; then printf 1; elif ! is_standby 2; then printf 2; else printf ''; fi
}

urls() {
  local standby
  standby="$(peer_of "$(primary_node)")"
  printf 'postgres://postgres@127.0.0.1:%s,127.0.0.1:%s/%s?target_session_attrs=read-write\n' \
    "$PORT1" "$PORT2" "$DB_NAME"
  printf 'postgres://postgres@127.0.0.1:%s/%s\n' "$(port_of "$standby")" "$DB_NAME"
}

cmd_start() {
  local dir="$1" port1="$2" port2="$3" mode="${4:-sync}" port
  for port in "$port1" "$port2"; do
    [[ "$port" =~ ^[0-9]+$ ]] && ((port > 0 && port < 65536)) || die "PORT must be 1-65535, got '$port'"
  done
  [[ "$port1" != "$port2" ]] || die "PORT1 and PORT2 must differ"
  [[ "$mode" == sync || "$mode" == async ]] || die "mode must be sync or async, got '$mode'"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd -P)"
  if [[ ! -f "$dir/cluster.env" ]]; then
    printf 'PORT1=%s\nPORT2=%s\nMODE=%s\n' "$port1" "$port2" "$mode" >"$dir/cluster.env"
  fi
  load "$dir"
  [[ "$PORT1 $PORT2 $MODE" == "$port1 $port2 $mode" ]] ||
    die "$DIR already holds a cluster on $PORT1,$PORT2 ($MODE); stop it and use a new DIR"
  log "using $BIN ($("$BIN/postgres" --version))"
  mkdir -p "$DIR/node1/sock" "$DIR/node2/sock"
  if [[ "$(id -u)" -eq 0 ]]; then
    id postgres >/dev/null 2>&1 || die "user 'postgres' does not exist (it comes with the postgresql package)"
    chown -R postgres:postgres "$DIR"
    as_owner test -w "$DIR" || die "user 'postgres' cannot write to $DIR (is a parent private?); use a path under /tmp"
  fi
  # Created by the owner: the server appends to them as that user.
  as_owner touch "$DIR/node1/postgres.log" "$DIR/node2/postgres.log"

  if [[ ! -f "$(data_of 1)/PG_VERSION" ]]; then
    log "initialising node1 in $(data_of 1)"
    # -A trust: initdb's rules cover the unix socket and loopback, replication connections included.
    as_owner "$BIN/initdb" -D "$(data_of 1)" -U postgres -A trust -E UTF8 --locale=C \
      >>"$DIR/node1/postgres.log" 2>&1 || die "initdb failed; see $DIR/node1/postgres.log"
    echo "include_if_exists = 'pg_cluster.conf'" | as_owner tee -a "$(data_of 1)/postgresql.conf" >/dev/null
    # No standby yet: the primary must not wait for one while the database is created.
    write_conf 1 primary ''
    start_node 1
    wait_role 1 primary
    psql_node 1 -d postgres -c "CREATE DATABASE $DB_NAME TEMPLATE template0 ENCODING 'UTF8'
      LOCALE 'C.UTF-8' LOCALE_PROVIDER icu ICU_LOCALE 'en'" >&2 2>/dev/null ||
      psql_node 1 -d postgres -c "CREATE DATABASE $DB_NAME" >&2
    log "created database $DB_NAME"
  fi
  if [[ ! -f "$(data_of 2)/PG_VERSION" ]]; then
    start_node 1
    log "copying node1 to node2 (pg_basebackup)"
    as_owner "$BIN/pg_basebackup" -h 127.0.0.1 -p "$PORT1" -U postgres -D "$(data_of 2)" -X stream \
      -c fast >>"$DIR/node2/postgres.log" 2>&1 || die "pg_basebackup failed; see $DIR/node2/postgres.log"
    as_owner touch "$(data_of 2)/standby.signal"
    write_conf 2 standby ''
    write_conf 1 primary "$(sync_name_for 1)"
    as_owner "$BIN/pg_ctl" -D "$(data_of 1)" reload >/dev/null
  fi

  local primary standby
  primary="$(primary_node)"
  [[ -n "$primary" ]] || die "both nodes carry standby.signal: promote one (deploy/pg-cluster.sh promote $DIR NODE)"
  standby="$(peer_of "$primary")"
  start_node "$primary"
  start_node "$standby"
  wait_role "$primary" primary
  wait_role "$standby" standby
  wait_streaming "$primary" "$standby"
  urls
}

# Waits until the primary sees the standby streaming (in sync mode: as its sync standby).
wait_streaming() {
  local primary="$1" standby="$2" want=streaming i state
  [[ "$MODE" == sync ]] && want="streaming sync"
  for ((i = 0; i < 600; i++)); do
    state="$(psql_node "$primary" -d postgres -F ' ' -c \
      "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = 'node$standby'" 2>/dev/null || true)"
    if [[ "$state" == "$want"* ]]; then
      log "node$standby is streaming from node$primary ($state)"
      return 0
    fi
    sleep 0.1
  done
  die "node$standby is not streaming from node$primary after 60 s; see $DIR/node$standby/postgres.log"
}

# Every process of NODE's server, the postmaster's orphans included: the processes whose working
# directory is its data directory (PostgreSQL gives each child a session of its own, so the
# postmaster's process group holds only the postmaster).
node_pids() {
  local data
  data="$(data_of "$1")"
  # One find, not a readlink per process: forks are slow on a loaded machine. A zombie has no cwd.
  { find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$data" 2>/dev/null || true; } | cut -d/ -f3
}

# Stops NODE so that it cannot take writes: fast shutdown, or SIGKILL of every process of it when it
# is frozen or does not stop in time; then standby.signal so that no plain start makes it a primary.
fence() {
  local node="$1" pid state pids i
  pid="$(postmaster_pid "$node")"
  state=""
  [[ -z "$pid" ]] || state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)"
  if [[ -n "$pid" && "$state" != T ]] &&
    as_owner "$BIN/pg_ctl" -D "$(data_of "$node")" -m fast -w -t "$FENCE_SECONDS" stop >/dev/null 2>&1; then
    log "fenced node$node: stopped"
  else
    # A frozen postmaster forks no new backend; a dead one may leave backends that still serve.
    [[ -z "$pid" ]] || kill -STOP "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      pids="$(node_pids "$node")"
      [[ -n "$pids" ]] || break
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      sleep 0.1
    done
    [[ -z "$(node_pids "$node")" ]] || die "node$node survived SIGKILL: $(node_pids "$node" | tr '\n' ' ')"
    if [[ -n "$pid" ]]; then log "fenced node$node: killed (state ${state:-?})"; else log "fenced node$node: not running"; fi
  fi
  as_owner touch "$(data_of "$node")/standby.signal"
}

cmd_promote() {
  load "$1"
  local node="$2" peer
  check_node "$node"
  peer="$(peer_of "$node")"
  # A stopped node may miss commits the other one acknowledged alone: it must rejoin first.
  [[ -n "$(postmaster_pid "$node")" ]] || die "node$node is not running; bring it back with rejoin, then promote"
  fence "$peer"
  if [[ "$(psql_node "$node" -d postgres -c 'SELECT pg_is_in_recovery()')" == f ]]; then
    log "node$node is already the primary"
  else
    # Alone after the promote: it acknowledges commits without waiting for a standby until rejoin.
    write_conf "$node" primary ''
    as_owner "$BIN/pg_ctl" -D "$(data_of "$node")" reload >/dev/null
    as_owner "$BIN/pg_ctl" -D "$(data_of "$node")" -w -t 60 promote >/dev/null ||
      die "node$node did not promote; see $DIR/node$node/postgres.log"
    wait_role "$node" primary
    log "node$node is the primary"
  fi
}

cmd_rejoin() {
  load "$1"
  local node="$2" primary
  check_node "$node"
  primary="$(peer_of "$node")"
  [[ "$(psql_node "$primary" -d postgres -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" == f ]] ||
    die "node$primary is not a running primary; promote it first"
  fence "$node"
  # pg_rewind reads the new timeline from the source's control file, written by a checkpoint.
  psql_node "$primary" -d postgres -c CHECKPOINT >/dev/null
  log "rewinding node$node onto node$primary"
  # pg_rewind finishes a crashed node's recovery in single-user mode, which refuses standby mode.
  as_owner rm -f "$(data_of "$node")/standby.signal"
  if ! as_owner "$BIN/pg_rewind" --target-pgdata="$(data_of "$node")" \
    --source-server="host=127.0.0.1 port=$(port_of "$primary") user=postgres dbname=postgres" \
    >>"$DIR/node$node/postgres.log" 2>&1; then
    log "pg_rewind failed; copying node$primary afresh (pg_basebackup)"
    as_owner rm -rf "$(data_of "$node")"
    as_owner "$BIN/pg_basebackup" -h 127.0.0.1 -p "$(port_of "$primary")" -U postgres \
      -D "$(data_of "$node")" -X stream -c fast >>"$DIR/node$node/postgres.log" 2>&1 ||
      die "pg_basebackup failed; see $DIR/node$node/postgres.log"
  fi
  as_owner touch "$(data_of "$node")/standby.signal"
  write_conf "$node" standby ''
  start_node "$node"
  wait_role "$node" standby
  write_conf "$primary" primary "$(sync_name_for "$primary")"
  as_owner "$BIN/pg_ctl" -D "$(data_of "$primary")" reload >/dev/null
  wait_streaming "$primary" "$node"
}

cmd_status() {
  load "$1"
  local node pid role
  printf 'mode %s\n' "$MODE"
  for node in 1 2; do
    pid="$(postmaster_pid "$node")"
    if [[ -z "$pid" ]]; then
      role="stopped$(is_standby "$node" && printf ', fenced or standby' || true)"
    else
      case "$(psql_node "$node" -d postgres -c 'SELECT pg_is_in_recovery()' 2>/dev/null || true)" in
      f) role="primary, pid $pid" ;;
      t) role="standby, pid $pid" ;;
      *) role="not answering, pid $pid" ;;
      esac
    fi
    printf 'node%s 127.0.0.1:%s %s\n' "$node" "$(port_of "$node")" "$role"
    if [[ "$role" == primary* ]]; then
      psql_node "$node" -d postgres -F ' ' -c "SELECT '  replica ' || application_name, state, sync_state,
        'replay_lag ' || coalesce(replay_lag::text, '0') FROM pg_stat_replication" || true
    fi
  done
}

cmd_stop() {
  DIR="$(cd "$1" 2>/dev/null && pwd -P)" || {
    log "not running ($1 does not exist)"
    return 0
  }
  [[ -f "$DIR/cluster.env" ]] || {
    log "not running (no cluster in $DIR)"
    return 0
  }
  load "$DIR"
  local node pid
  for node in 1 2; do
    pid="$(postmaster_pid "$node")"
    [[ -n "$pid" ]] || continue
    # A frozen node (a test's SIGSTOP) would never see the shutdown request.
    # shellcheck disable=SC2046
    kill -CONT $(node_pids "$node") 2>/dev/null || true
    if ! as_owner "$BIN/pg_ctl" -D "$(data_of "$node")" -m fast -w -t 30 stop >/dev/null 2>&1; then
      log "node$node did not stop in 30 s: SIGKILL"
      # shellcheck disable=SC2046
      kill -KILL $(node_pids "$node") 2>/dev/null || true
    fi
    log "stopped node$node"
  done
}

case "${1:-}" in
start)
  [[ $# -eq 4 || $# -eq 5 ]] || usage
  cmd_start "$2" "$3" "$4" "${5:-sync}"
  ;;
promote)
  [[ $# -eq 3 ]] || usage
  cmd_promote "$2" "$3"
  ;;
rejoin)
  [[ $# -eq 3 ]] || usage
  cmd_rejoin "$2" "$3"
  ;;
status)
  [[ $# -eq 2 ]] || usage
  cmd_status "$2"
  ;;
stop)
  [[ $# -eq 2 ]] || usage
  cmd_stop "$2"
  ;;
*) usage ;;
esac
