#!/bin/bash
# bench/schedules.sh: how late periodic jobs come, side by side for queue's
# schedules, pg_cron and pg-boss's schedule(), with 1 schedule and with
# 10,000; and the CPU the queue's background worker spends per tick, and
# while idle.  Not part of run.sh (issue #50, item 3).
#
#   bash bench/schedules.sh           full run, about 12-15 minutes
#   bash bench/schedules.sh --quick   smoke run, about 5-6 minutes: 15 s
#                                     windows, 1 minute boundary, results
#                                     in /tmp, not bench/results
#
# One system after another on one throwaway cluster of its own
# (BENCH_DIR/BENCH_PORT, default /tmp/queue_sched and 54431; the settings of
# bench/tools.sh, with shared_preload_libraries = 'queue,pg_cron'), each on
# a fresh database (pg_cron: in 'postgres', its cron.database_name):
#
#   queue    1 schedule '* * * * * *' for 60 s, and 10,000 schedules
#            '<i % 60> * * * * *' (~167 ticks a second) for 60 s: every tick
#            due in the window.  Lateness = enqueued_at - run_at of the tick's
#            job (enqueued_at is the firing transaction's now()).  Worker CPU
#            per tick = utime + stime of the 'queue worker' process over the
#            window / ticks fired.  Idle: the worker's CPU over 30 s with no
#            schedules, and with 10,000 schedules '0 0 1 1 *'.
#   pg_cron  (1.4.2, minute resolution, defaults: cron.max_running_jobs 32,
#            a libpq connection per run) 1 job and 10,000 jobs '* * * * *',
#            each running SELECT queue.enqueue('pgcron', '{"job": i}'), over 2
#            minute boundaries.  Lateness = enqueued_at - the minute: the
#            n-th run of a job after the first boundary belongs to the n-th
#            boundary.
#   pg-boss  (bench/node, schedule() with its defaults; see
#            bench/node/schedules.mjs) 1 and 10,000 schedules '* * * * *' of
#            one queue (key k<i>, data {s: i}), over 2 minute boundaries, one
#            pg-boss process and no consumer.  Lateness = created_on of the
#            queue's job - the minute (the slot of the __pgboss__send-it job
#            that forwarded it, matched per schedule in order).
#
# A tick later than SCHED_CAP seconds (60) counts as missed, and shows as
# ">60 s" where a percentile falls on one; pg_cron's and pg-boss's phases
# wait at most that long past their last boundary.  p50/p99 are
# percentile_disc over the ticks due (measured + missed).
#
# Prints a table and writes it to bench/results/<UTC timestamp>-schedules/
# summary.md (--quick: /tmp/queue-schedules-<stamp>-quick/), with the rows
# in raw.tsv and idle.tsv.
# As root on Debian: installs what test/lib.sh needs, postgresql-15-cron and
# bench/node's packages (npm ci) if missing, and builds and installs the
# extension unless QUEUE_SKIP_BUILD=1.  Asserts nothing about speed.
#
# Environment: PGBIN, QUEUE_SKIP_BUILD=1, BENCH_DIR, BENCH_PORT,
#   SCHED_OUT (the output directory), SCHED_N (10000), SCHED_CAP (60),
#   SCHED_SYSTEMS=queue,pgcron,pgboss
set -euo pipefail

QUICK=""
for a in "$@"; do
	case "$a" in
	--quick) QUICK=1 ;;
	-h | --help) sed -n '2,/^set -e/p' "$0" | sed 's/^# \{0,1\}//; /^set -e/d'; exit 0 ;;
	*) echo "unknown argument: $a" >&2; exit 2 ;;
	esac
done

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DIR=${BENCH_DIR:-/tmp/queue_sched}
PORT=${BENCH_PORT:-54431}
N=${SCHED_N:-10000}
CAP=${SCHED_CAP:-60}
SYSTEMS=${SCHED_SYSTEMS:-queue,pgcron,pgboss}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
if [ -n "$QUICK" ]; then
	RUN=15 IDLE=10 BOUNDARIES=1
	OUT=${SCHED_OUT:-/tmp/queue-schedules-$STAMP-quick}
else
	RUN=60 IDLE=30 BOUNDARIES=2
	OUT=${SCHED_OUT:-$HERE/results/$STAMP-schedules}
fi
NODE=$HERE/node/node_modules/.bin/node
T_START=$(date +%s)

say() { echo "== $*" >&2; }
has() { [[ ",$SYSTEMS," == *",$1,"* ]]; }

# ------------------------------------------------------------ dependencies
WANT_PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
# shellcheck source=../test/lib.sh
source "$ROOT/test/lib.sh"
PGBIN=$WANT_PGBIN
queue_install_deps
missing=""
dpkg -s postgresql-15-cron >/dev/null 2>&1 || missing="$missing postgresql-15-cron"
has pgboss && ! command -v npm >/dev/null 2>&1 && missing="$missing npm"
if [ -n "$missing" ]; then
	say "installing:$missing"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
if has pgboss && { [ ! -x "$NODE" ] || [ "$HERE/node/package-lock.json" -nt "$HERE/node/node_modules/.package-lock.json" ]; }; then
	say "npm ci (bench/node)"
	(cd "$HERE/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
[ "${QUEUE_SKIP_BUILD:-}" = 1 ] || queue_build
# pg_cron from Debian lives in the system tree; a relocated tree needs a copy
SHARE=$("$PGBIN/pg_config" --sharedir)
PKGLIB=$("$PGBIN/pg_config" --pkglibdir)
if [ ! -f "$PKGLIB/pg_cron.so" ]; then
	cp /usr/share/postgresql/15/extension/pg_cron* "$SHARE/extension/"
	cp /usr/lib/postgresql/15/lib/pg_cron.so "$PKGLIB/"
fi

# ------------------------------------------------------------ cluster
if "$PGBIN/pg_isready" -q -h "$DIR" -p "$PORT" 2>/dev/null || ss -lx 2>/dev/null | grep -q "\.s\.PGSQL\.$PORT\b"; then
	echo "something already listens on port $PORT or in $DIR; set BENCH_DIR and BENCH_PORT" >&2
	exit 1
fi
# tools.sh takes one line of postgresql.conf in EXTRA_CONF, which lib.sh
# writes as it is: these are three.  pg_cron connects for each run, and the
# cluster listens on its socket only.
EXTRA_CONF=$(printf '%s\n' "shared_preload_libraries = 'queue,pg_cron'" \
	"cron.database_name = 'postgres'" "cron.host = '$DIR'")
say "cluster in $DIR, port $PORT"
# shellcheck source=tools.sh
source "$HERE/tools.sh"   # the cluster, q, ticks, worker_pid; queue in 'postgres'
BOSS_PID=""
cleanup() {
	if [ -n "$BOSS_PID" ]; then kill "$BOSS_PID" 2>/dev/null || true; fi
	queue_cluster_stop "$DIR"
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
q -c "CREATE EXTENSION pg_cron" >/dev/null
HZ=$(getconf CLK_TCK)
ROWS=$TMP/raw.tsv   # system, schedules, measured, due, p50, p99, max, CPU ms per tick, note
IDLE_ROWS=$TMP/idle.tsv
: >"$ROWS"
: >"$IDLE_ROWS"

# ------------------------------------------------------------ helpers
now() { date +%s.%N; }
sleep_until() { sleep "$(awk -v t="$1" -v n="$(now)" 'BEGIN { d = t - n; print (d > 0 ? d : 0) }')"; }
# the first minute boundary after the epoch $1, as an epoch
next_minute() { awk -v t="$1" 'BEGIN { print (int(t / 60) + 1) * 60 }'; }
fresh_db() { PGOPTIONS='-c client_min_messages=warning' q -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" >/dev/null; }
since() { awk -v t="$1" -v n="$(now)" 'BEGIN { printf "%.1f", n - t }'; }
cpu_ms() { awk -v t="$1" -v hz="$HZ" 'BEGIN { printf "%.0f", t * 1000 / hz }'; }

# lateness DB DUE SQL: SQL yields late_ms, one row per tick that came; of
# DUE ticks the rest never came.  Prints measured|due|p50|p99|max (ms), a
# tick later than CAP (or missing) as Infinity.
lateness() {
	q -d "$1" -F '|' -c "WITH l AS ($3),
	  v AS (SELECT CASE WHEN late_ms <= $CAP * 1000 THEN late_ms ELSE 'infinity' END AS ms FROM l
	        UNION ALL
	        SELECT 'infinity' FROM generate_series(1, $2 - (SELECT count(*) FROM l)))
	SELECT (SELECT count(*) FROM l WHERE late_ms <= $CAP * 1000), $2,
	       percentile_disc(0.5) WITHIN GROUP (ORDER BY ms),
	       percentile_disc(0.99) WITHIN GROUP (ORDER BY ms), max(ms)
	  FROM v"
}
# wait_for DB DUE DEADLINE SQL: until all DUE ticks came within CAP, or DEADLINE
wait_for() {
	while awk -v t="$3" -v n="$(now)" 'BEGIN { exit !(n < t) }'; do
		[ "$(q -d "$1" -c "SELECT count(*) FROM ($4) l WHERE late_ms <= $CAP * 1000")" -ge "$2" ] && return
		sleep 2
	done
}

# ------------------------------------------------------------ queue
# queue_ticks N CRON_SQL: N schedules, schedule i's cron CRON_SQL (of i),
# with a seconds field of * or a number
queue_ticks() {
	local n=$1 cron=$2 db=sched_queue worker made t0 t1 c0 c1 due stats measured
	say "queue: $n schedule(s), $RUN s"
	fresh_db $db
	q -d $db -c "CREATE EXTENSION queue" -c "SELECT queue.create('ticks')" >/dev/null
	worker=$(PGDATABASE=$db worker_pid)
	made=$(now)
	q -d $db -c "SELECT count(queue.schedule('s' || i, 'ticks', $cron)) FROM generate_series(0, $n - 1) i" >/dev/null
	made=$(since "$made")
	# the ticks due from the second whole second after they exist
	t0=$(awk -v t="$(now)" 'BEGIN { print int(t) + 2 }')
	t1=$((t0 + RUN))
	sleep_until "$t0"; c0=$(ticks "$worker")
	sleep_until "$t1"; c1=$(ticks "$worker")
	[ -d "/proc/$worker" ] || { echo "the queue worker $worker exited during the run" >&2; exit 1; }
	sleep 2   # the window's last ticks
	# due: the (schedule, second) pairs whose seconds field is * or that second
	due=$(q -d $db -c "SELECT count(*) FROM generate_series(0, $n - 1) i,
	        generate_series(to_timestamp($t0), to_timestamp($t1 - 1), '1 s') t
	        WHERE split_part($cron, ' ', 1) IN ('*', extract(second FROM t)::int::text)")
	stats=$(lateness $db "$due" "SELECT extract(epoch FROM enqueued_at - run_at) * 1000 AS late_ms
	        FROM queue.jobs WHERE queue = 'ticks' AND run_at >= to_timestamp($t0) AND run_at < to_timestamp($t1)")
	measured=${stats%%|*}
	echo "queue|$n|$stats|$(awk -v t=$((c1 - c0)) -v hz="$HZ" -v m="$measured" 'BEGIN { printf "%.3f", m ? t * 1000 / hz / m : 0 }')|worker CPU $(cpu_ms $((c1 - c0))) ms over $RUN s; $n schedule(s) made in $made s" >>"$ROWS"
	q -c "DROP DATABASE $db WITH (FORCE)" >/dev/null
}

queue_idle() {
	local db=sched_idle worker c0 c1
	say "queue: idle worker, $IDLE s with no schedules and with $N not due"
	fresh_db $db
	q -d $db -c "CREATE EXTENSION queue" -c "SELECT queue.create('ticks')" >/dev/null
	worker=$(PGDATABASE=$db worker_pid)
	sleep 2
	c0=$(ticks "$worker"); sleep "$IDLE"; c1=$(ticks "$worker")
	echo "no schedules|$(cpu_ms $((c1 - c0)))" >>"$IDLE_ROWS"
	q -d $db -c "SELECT count(queue.schedule('s' || i, 'ticks', '0 0 1 1 *')) FROM generate_series(0, $N - 1) i" >/dev/null
	sleep 2
	c0=$(ticks "$worker"); sleep "$IDLE"; c1=$(ticks "$worker")
	[ -d "/proc/$worker" ] || { echo "the queue worker $worker exited during the run" >&2; exit 1; }
	echo "$N schedules '0 0 1 1 *'|$(cpu_ms $((c1 - c0)))" >>"$IDLE_ROWS"
	q -c "DROP DATABASE $db WITH (FORCE)" >/dev/null
}

# ------------------------------------------------------------ pg_cron
pgcron_ticks() {
	local n=$1 made m1 mb waited sql stats runs
	say "pg_cron: $n job(s), $BOUNDARIES minute boundary(ies)"
	PGOPTIONS='-c client_min_messages=warning' q -c "SELECT queue.drop('pgcron', if_exists => true)" -c "SELECT queue.create('pgcron')" \
		-c "TRUNCATE cron.job_run_details" >/dev/null
	# made well before a boundary, so that the next is their first run
	if [ $(($(next_minute "$(now)") - $(date +%s))) -lt 30 ]; then sleep_until $(($(next_minute "$(now)") + 1)); fi
	made=$(now)
	q -c "SELECT count(cron.schedule('j' || i, '* * * * *',
	        format('SELECT queue.enqueue(%L, %L)', 'pgcron', jsonb_build_object('job', i))))
	        FROM generate_series(0, $n - 1) i" >/dev/null
	made=$(since "$made")
	m1=$(next_minute "$(now)")
	mb=$((m1 + 60 * (BOUNDARIES - 1)))
	# a job's k-th run from m1 on is its run of boundary k
	sql="SELECT extract(epoch FROM enqueued_at - to_timestamp($m1) - (k - 1) * interval '1 minute') * 1000 AS late_ms
	       FROM (SELECT enqueued_at, row_number() OVER (PARTITION BY payload->>'job' ORDER BY enqueued_at) AS k
	               FROM queue.jobs WHERE queue = 'pgcron' AND enqueued_at >= to_timestamp($m1)) r
	      WHERE k <= $BOUNDARIES"
	sleep_until "$m1"
	wait_for postgres $((n * BOUNDARIES)) $((mb + CAP + 1)) "$sql"
	waited=$(since "$mb")
	stats=$(lateness postgres $((n * BOUNDARIES)) "$sql")
	runs=$(q -c "SELECT string_agg(status || ' ' || c, ', ') FROM
	        (SELECT status, count(*) AS c FROM cron.job_run_details GROUP BY 1 ORDER BY 1) s")
	echo "pg_cron|$n|$stats||$n job(s) made in $made s; measured $waited s after the last boundary; cron.job_run_details at the end: $runs" >>"$ROWS"
	q -c "DELETE FROM cron.job" >/dev/null
	# let the runs in flight end before the next phase
	for _ in $(seq 120); do
		[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_cron'")" = 0 ] && break
		sleep 1
	done
}

# ------------------------------------------------------------ pg-boss
PGBOSS_DEFAULTS=""
pgboss_ticks() {
	local n=$1 db=sched_pgboss ready made m1 mb waited sql stats sendit
	say "pg-boss: $n schedule(s), $BOUNDARIES minute boundary(ies)"
	fresh_db $db
	PGDATABASE=$db "$NODE" "$HERE/node/schedules.mjs" "$n" >"$TMP/boss.out" 2>"$TMP/boss.err" &
	BOSS_PID=$!
	for _ in $(seq 600); do
		grep -q '^ready ' "$TMP/boss.out" && break
		kill -0 "$BOSS_PID" 2>/dev/null || { echo "schedules.mjs failed:" >&2; cat "$TMP/boss.err" >&2; exit 1; }
		sleep 0.5
	done
	read -r _ ready made < <(grep '^ready ' "$TMP/boss.out") || { echo "schedules.mjs did not get ready" >&2; exit 1; }
	PGBOSS_DEFAULTS=$(sed -n 's/^defaults //p' "$TMP/boss.out")
	m1=$(next_minute "$(awk -v t="$ready" 'BEGIN { printf "%.3f", t + 1 }')")
	mb=$((m1 + 60 * (BOUNDARIES - 1)))
	# the n-th job of schedule s came from its n-th send-it job (in slot order)
	sql="WITH s AS (SELECT data->>'key' AS k, (data->>'slot')::timestamp AT TIME ZONE 'UTC' AS due,
	                       row_number() OVER (PARTITION BY data->>'key' ORDER BY data->>'slot') AS n
	                  FROM pgboss.job WHERE name = '__pgboss__send-it'),
	          t AS (SELECT 'k' || (data->>'s') AS k, created_on,
	                       row_number() OVER (PARTITION BY data->>'s' ORDER BY created_on) AS n
	                  FROM pgboss.job WHERE name = 'ticks')
	     SELECT extract(epoch FROM t.created_on - s.due) * 1000 AS late_ms
	       FROM s JOIN t USING (k, n) WHERE s.due BETWEEN to_timestamp($m1) AND to_timestamp($mb)"
	sleep_until "$m1"
	wait_for $db $((n * BOUNDARIES)) $((mb + CAP + 1)) "$sql"
	waited=$(since "$mb")
	stats=$(lateness $db $((n * BOUNDARIES)) "$sql")
	sendit=$(q -d $db -c "SELECT string_agg('slot ' || slot || ' ' || state || ' ' || c, ', ') FROM
	        (SELECT to_char((data->>'slot')::timestamp, 'HH24:MI') AS slot, state, count(*) AS c
	           FROM pgboss.job WHERE name = '__pgboss__send-it' GROUP BY 1, 2 ORDER BY 1, 2) s")
	echo "pg-boss|$n|$stats||$n schedule(s) made in $made s; measured $waited s after the last boundary; __pgboss__send-it jobs at the end: $sendit" >>"$ROWS"
	kill "$BOSS_PID"
	wait "$BOSS_PID" 2>/dev/null || true
	BOSS_PID=""
	q -c "DROP DATABASE $db WITH (FORCE)" >/dev/null
}

# ------------------------------------------------------------ run
if has queue; then
	queue_idle
	queue_ticks 1 "'* * * * * *'"
	queue_ticks "$N" "(i % 60) || ' * * * * *'"
fi
if has pgcron; then
	pgcron_ticks 1
	pgcron_ticks "$N"
fi
if has pgboss; then
	pgboss_ticks 1
	pgboss_ticks "$N"
fi

# ------------------------------------------------------------ report
ms() { awk -v v="$1" -v cap="$CAP" 'BEGIN { if (v == "") print ""; else if (v ~ /nfinity/) print ">" cap " s"; else printf "%.1f", v }'; }
mkdir -p "$OUT"
cp "$ROWS" "$OUT/raw.tsv"
cp "$IDLE_ROWS" "$OUT/idle.tsv"
SENDIT_BATCH=$(grep -A2 'pollingIntervalSeconds: this.config.cronWorkerIntervalSeconds' \
	"$HERE/node/node_modules/pg-boss/dist/timekeeper.js" 2>/dev/null | grep -o 'batchSize: [0-9]*' | cut -d' ' -f2 || true)
{
	echo "# Periodic jobs: lateness of ticks, and the queue worker's CPU"
	echo
	echo "\`${SCHED_N:+SCHED_N=$SCHED_N }bash bench/schedules.sh${QUICK:+ --quick}\` at git" \
		"$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- src sql 2>/dev/null || echo '+local changes')" \
		"($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $("$PGBIN/postgres" --version)," \
		"pg_cron $(dpkg-query -W -f '${Version}' postgresql-15-cron)," \
		"pg-boss $(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$HERE/node/node_modules/pg-boss/package.json" 2>/dev/null | head -1))."
	echo "Windows: queue $RUN s of ticks; pg_cron and pg-boss $BOUNDARIES minute boundary(ies), waited on at most $CAP s past the last."
	echo "Lateness: queue enqueued_at - run_at; pg_cron the job's enqueued_at - its minute; pg-boss the job's created_on - its minute."
	echo "A tick later than $CAP s, or never, counts as >$CAP s; p50/p99 are over the ticks due."
	echo
	echo "| system | schedules | ticks within ${CAP} s / due | lateness p50 (ms) | p99 (ms) | max (ms) | worker CPU per tick (ms) |"
	echo "|---|---:|---:|---:|---:|---:|---:|"
	while IFS='|' read -r sys n measured due p50 p99 max cpu note; do
		echo "| $sys | $n | $measured / $due | $(ms "$p50") | $(ms "$p99") | $(ms "$max") | $cpu |"
	done <"$ROWS"
	echo
	while IFS='|' read -r what cpu; do
		echo "- queue worker idle for $IDLE s, $what: $cpu ms CPU"
	done <"$IDLE_ROWS"
	while IFS='|' read -r sys n measured due p50 p99 max cpu note; do
		echo "- $sys, $n: $note"
	done <"$ROWS"
	echo "- pg_cron settings: cron.max_running_jobs $(q -c 'SHOW cron.max_running_jobs'), cron.use_background_workers $(q -c 'SHOW cron.use_background_workers'), cron.log_run $(q -c 'SHOW cron.log_run')"
	[ -n "$PGBOSS_DEFAULTS" ] && echo "- pg-boss defaults: $PGBOSS_DEFAULTS; the send-it worker fetches ${SENDIT_BATCH:-?} jobs a poll"
	echo "- CPU ticks are of $((1000 / HZ)) ms; the run took $(( ($(date +%s) - T_START) / 60 )) min"
} | tee "$OUT/summary.md"
say "summary: $OUT/summary.md"
