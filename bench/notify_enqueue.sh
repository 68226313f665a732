#!/bin/bash
# bench/notify_enqueue.sh: what waking listeners costs producers.
#
#   bench/notify_enqueue.sh [SECONDS [REPEATS]]     (default 10 s, 3 repeats)
#
# pgbench, CLIENTS (default 16) concurrent clients, each transaction one
# single-job enqueue, for SECONDS per run:
#
#   (a) SELECT queue.enqueue('bench', '{"n":1}'), nobody listening
#   (b) the same with LISTENERS (default 4) sessions LISTENing on queue_bench
#       and reading their notifications as they come (psycopg2)
#   (b') the same with LISTENERS psql sessions that LISTEN on queue_bench and
#       then sit in pg_sleep(), never reading a notification: the cost on
#       the server side alone, without the listeners' own CPU
#   (c) baseline: a plain one-table queue, INSERT + pg_notify() in every
#       transaction, with the same listeners on its channel
#   (c0) the same as (c) with nobody listening
#   (d) the same plain INSERT without any notify
#
# Runs are interleaved (a b b' c c0 d, a b b' c c0 d, ...) and each case is
# repeated REPEATS times; the table shows median tps, min-max, and the
# median number of notifications each listener received.  Ratios (b)/(a)
# and (c)/(d) follow.  This is a measurement, not a test: no pass/fail.
#
# Runs against the cluster and database given by the PG* environment
# variables (CREATE EXTENSION queue if missing; makes and finally drops
# queue "bench" and table queue_bench_plain).  For a throwaway cluster:
#
#   source test/lib.sh; queue_cluster_start /tmp/queue_bench 54399
#   bench/notify_enqueue.sh; queue_cluster_stop /tmp/queue_bench
#
# Environment: CLIENTS, LISTENERS, PGBENCH (default: $PGBIN/pgbench if
# PGBIN is set, else pgbench from PATH), PYTHON (/usr/bin/python3, with
# psycopg2, for the listeners).
set -u

DURATION=${1:-10}
REPEATS=${2:-3}
CLIENTS=${CLIENTS:-16}
LISTENERS=${LISTENERS:-4}
PYTHON=${PYTHON:-/usr/bin/python3}
if [ -z "${PGBENCH:-}" ]; then
	if [ -n "${PGBIN:-}" ] && [ -x "$PGBIN/pgbench" ]; then PGBENCH=$PGBIN/pgbench; else PGBENCH=pgbench; fi
fi
THREADS=$(nproc 2>/dev/null || echo 2)
[ "$THREADS" -gt "$CLIENTS" ] && THREADS=$CLIENTS
TMP=$(mktemp -d /tmp/queue_bench.XXXXXX)
LISTENER_PID=""

psql_() { PGOPTIONS="-c client_min_messages=warning ${PGOPTIONS:-}" psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

stop_listeners() {
	if [ -n "$LISTENER_PID" ]; then
		kill -TERM "$LISTENER_PID" 2>/dev/null
		wait "$LISTENER_PID" 2>/dev/null
		LISTENER_PID=""
	fi
}
cleanup() {
	stop_listeners
	stop_sleepers 2>/dev/null
	psql_ -c "SELECT queue.drop('bench', if_exists => true)" -c "DROP TABLE IF EXISTS queue_bench_plain" >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

psql_ -c "CREATE EXTENSION IF NOT EXISTS queue" >/dev/null ||
	{ echo "cannot connect or create extension queue (check PGHOST, PGPORT, PGUSER, PGDATABASE)" >&2; exit 1; }
"$PYTHON" -c "import psycopg2" 2>/dev/null || { echo "$PYTHON has no psycopg2" >&2; exit 1; }
"$PGBENCH" --version >/dev/null 2>&1 || { echo "no pgbench ($PGBENCH)" >&2; exit 1; }

# ---------------------------------------------------------------- scripts
cat >"$TMP/queue.sql" <<'SQL'
SELECT queue.enqueue('bench', '{"n":1}');
SQL
cat >"$TMP/plain_notify.sql" <<'SQL'
WITH j AS (INSERT INTO queue_bench_plain (payload) VALUES ('{"n":1}') RETURNING id)
SELECT pg_notify('bench_plain', '') FROM j;
SQL
cat >"$TMP/plain.sql" <<'SQL'
INSERT INTO queue_bench_plain (payload) VALUES ('{"n":1}');
SQL

# LISTENERS sessions on one channel, reading notifications as they arrive
# until SIGTERM; then prints how many each received.
cat >"$TMP/listen.py" <<'PY'
import select, signal, sys
import psycopg2

channel, n, ready_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
conns = []
for _ in range(n):
    c = psycopg2.connect("")
    c.autocommit = True
    c.cursor().execute("LISTEN " + channel)
    conns.append(c)
counts = [0] * n
open(ready_file, "w").write("ready\n")
while not stop:
    try:
        readable = select.select(conns, [], [], 0.2)[0]
    except InterruptedError:
        continue
    for c in readable:
        c.poll()
        counts[conns.index(c)] += len(c.notifies)
        del c.notifies[:]
for i, c in enumerate(conns):
    c.poll()
    counts[i] += len(c.notifies)
print(" ".join(map(str, counts)))
PY

start_listeners() {
	rm -f "$TMP/ready"
	"$PYTHON" "$TMP/listen.py" "$1" "$LISTENERS" "$TMP/ready" >"$TMP/listen.out" 2>"$TMP/listen.err" &
	LISTENER_PID=$!
	for _ in $(seq 100); do
		[ -f "$TMP/ready" ] && return 0
		sleep 0.1
	done
	echo "listeners did not start:" >&2
	cat "$TMP/listen.err" >&2
	exit 1
}

# LISTENERS psql sessions that LISTEN on a channel, then sleep.
start_sleepers() {
	local n
	for _ in $(seq "$LISTENERS"); do
		PGAPPNAME=queue_bench_sleeper psql -X -q -c "LISTEN $1" -c "SELECT pg_sleep(3600)" >/dev/null 2>&1 &
	done
	for _ in $(seq 100); do
		n=$(psql_ -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'queue_bench_sleeper' AND wait_event = 'PgSleep'")
		[ "$n" = "$LISTENERS" ] && return 0
		sleep 0.1
	done
	echo "sleeping listeners did not start" >&2
	exit 1
}
stop_sleepers() {
	psql_ -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'queue_bench_sleeper'" >/dev/null
	wait 2>/dev/null
}

# Fresh tables before every run, so no run pays for its predecessors' rows.
reset_state() {
	psql_ -c "SELECT queue.drop('bench', if_exists => true)" \
		-c "SELECT queue.create('bench')" \
		-c "DROP TABLE IF EXISTS queue_bench_plain" \
		-c "CREATE TABLE queue_bench_plain (
		        id bigserial PRIMARY KEY,
		        state text NOT NULL DEFAULT 'ready',
		        priority int NOT NULL DEFAULT 0,
		        run_at timestamptz NOT NULL DEFAULT now(),
		        payload jsonb NOT NULL)" \
		-c "CREATE INDEX ON queue_bench_plain (priority DESC, id) WHERE state = 'ready'" >/dev/null || exit 1
	psql_ -c "CHECKPOINT" >/dev/null 2>&1
}

# run CASE SCRIPT [CHANNEL]: one pgbench run; appends "CASE tps notifications-per-listener".
run() {
	local name=$1 script=$2 channel=${3:-} sleepers=${4:-} tps notes="-"
	reset_state
	[ -n "$channel" ] && start_listeners "$channel"
	[ -n "$sleepers" ] && start_sleepers "$sleepers"
	"$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$THREADS" -T "$DURATION" -f "$TMP/$script" \
		>"$TMP/pgbench.out" 2>&1
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$TMP/pgbench.out")
	if [ -z "$tps" ]; then
		echo "pgbench failed for ($name):" >&2
		cat "$TMP/pgbench.out" >&2
		exit 1
	fi
	[ -n "$sleepers" ] && stop_sleepers
	if [ -n "$channel" ]; then
		sleep 0.5 # the last coalesced NOTIFYs
		stop_listeners
		notes=$(awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; printf "%d", s / NF }' "$TMP/listen.out")
	fi
	echo "$name $tps $notes" >>"$TMP/results"
	printf '  run %s/%s (%s): %s tps%s\n' "$r" "$REPEATS" "$name" "$tps" \
		"$([ "$notes" != - ] && echo ", $notes notifications per listener")" >&2
}

server=$(psql_ -c "SHOW server_version")
settings=$(psql_ -F ' ' -c "SELECT string_agg(name || '=' || setting, ', ' ORDER BY name) FROM pg_settings
                            WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers', 'max_connections')")
echo "# notify_enqueue: PostgreSQL $server, $(nproc) CPUs, $CLIENTS clients x ${DURATION} s, $REPEATS repeats, $LISTENERS listeners" >&2
echo "# $settings" >&2

: >"$TMP/results"
for r in $(seq "$REPEATS"); do
	run a queue.sql
	run b queue.sql queue_bench
	run "b'" queue.sql "" queue_bench
	run c plain_notify.sql bench_plain
	run c0 plain_notify.sql
	run d plain.sql
done

# ---------------------------------------------------------------- report
"$PYTHON" - "$TMP/results" "$CLIENTS" "$DURATION" "$REPEATS" "$LISTENERS" "$server" "$(nproc)" "$settings" <<'PY'
import statistics, sys
path, clients, duration, repeats, listeners, server, cpus, settings = sys.argv[1:]
runs = {}
for line in open(path):
    name, tps, notes = line.split()
    runs.setdefault(name, []).append((float(tps), None if notes == "-" else int(notes)))
desc = {
    "a": "queue.enqueue, no listeners",
    "b": "queue.enqueue, %s listeners on queue_bench" % listeners,
    "b'": "queue.enqueue, %s listeners on queue_bench not reading (pg_sleep)" % listeners,
    "c": "plain INSERT + pg_notify, %s listeners" % listeners,
    "c0": "plain INSERT + pg_notify, no listeners",
    "d": "plain INSERT, no notify",
}
med = {}
print()
print("PostgreSQL %s, %s CPUs, pgbench -c %s -T %s, %s runs per case (%s)"
      % (server, cpus, clients, duration, repeats, settings))
print()
print("| case | producer transaction | median tps | min - max tps | notifications per listener (median) | transactions per notification (median) |")
print("|---|---|---:|---:|---:|---:|")
for name in ["a", "b", "b'", "c", "c0", "d"]:
    if name not in runs:
        continue
    tps = [t for t, _ in runs[name]]
    notes = [n for _, n in runs[name] if n is not None]
    med[name] = statistics.median(tps)
    per = [t * float(duration) / n for t, n in runs[name] if n]
    print("| (%s) | %s | %.0f | %.0f - %.0f | %s | %s |"
          % (name, desc[name], med[name], min(tps), max(tps),
             "%.0f" % statistics.median(notes) if notes else "-",
             "%.1f" % statistics.median(per) if per else "-"))
print()
for num, den, what in [("b", "a", "cost of %s listeners for queue.enqueue" % listeners),
                       ("b'", "a", "the same, listeners not reading"),
                       ("c", "d", "cost of NOTIFY per transaction (with listeners) for a plain insert"),
                       ("c0", "d", "cost of NOTIFY per transaction (no listeners) for a plain insert")]:
    if num in med and den in med:
        print("- (%s)/(%s) = %.2f  (%s)" % (num, den, med[num] / med[den], what))
PY
