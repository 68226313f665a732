#!/bin/bash
# bench/many_queues.sh: what idle queues cost, and whether a busy queue
# feels them.  Not part of run.sh: a tool for issue #53's work, like
# due_stream.sh.
#
#   bash bench/many_queues.sh [COUNTS]          (default "0 10 1000")
#
# Starts its own cluster (BENCH_DIR/BENCH_PORT, default /tmp/queue_many and
# 54425) with the benchmark's settings and queue.max_queues = 20000, makes
# one busy queue, then idle queues up to each count in turn (one per
# transaction, each holding two jobs: one ready, one scheduled an hour
# out, as in the issue), and at each count reports:
#   - create: seconds per queue for the queues made since the last count;
#   - relations and bytes of schema queue per queue;
#   - the idle worker's CPU, % of a core over IDLE_SECONDS (default 30);
#   - queue.stats and count(*) of queue.jobs, ms (best of 3);
#   - the busy queue's single-job enqueue rate, 4 pgbench clients for
#     ENQ_SECONDS (default 10), and its ratio to the first count's.
# Honours PGBIN like run.sh; it never builds.  Writes
# bench/results/<UTC timestamp>-many-queues/report.md.
set -euo pipefail
COUNTS=${1:-"0 10 1000"}
IDLE_SECONDS=${IDLE_SECONDS:-30}
ENQ_SECONDS=${ENQ_SECONDS:-10}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DIR=${BENCH_DIR:-/tmp/queue_many}
PORT=${BENCH_PORT:-54425}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT="$HERE/results/$STAMP-many-queues"
EXTRA_CONF="queue.max_queues = 20000"
source "$HERE/tools.sh"

q -c "SELECT queue.create('busy')" >/dev/null
worker=$(worker_pid)
hz=$(getconf CLK_TCK)
echo "SELECT queue.enqueue('busy', '{\"n\": 1}');" >"$TMP/enqueue.sql"

best_ms() {
	local best=""
	for _ in 1 2 3; do
		local t0 t1 ms
		t0=$(date +%s%N)
		q -c "$1" >/dev/null
		t1=$(date +%s%N)
		ms=$(((t1 - t0) / 1000000))
		if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
	done
	echo "$best"
}

mkdir -p "$OUT"
{
	echo "# Many queues: idle cost and a busy queue beside them"
	echo
	echo "\`bash bench/many_queues.sh \"$COUNTS\"\` at git $(git -C "$ROOT" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs."
	echo "Idle queues hold two jobs each (one ready, one scheduled an hour out); idle CPU over ${IDLE_SECONDS} s;"
	echo "enqueue: 4 pgbench clients, -M prepared, ${ENQ_SECONDS} s, into the one busy queue."
	echo
	echo "| idle queues | create, ms/queue | relations/queue | MB of schema queue | idle worker, % of a core | queue.stats, ms | count(*) queue.jobs, ms | busy enqueue, jobs/s | ratio to the first |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$OUT/report.md"

made=0
first_rate=""
for n in $COUNTS; do
	t0=$(date +%s%N)
	if [ "$n" -gt "$made" ]; then
		for i in $(seq $((made + 1)) "$n"); do
			echo "SELECT queue.create('idle_$i');"
			echo "SELECT queue.enqueue('idle_$i', '{}');"
			echo "SELECT queue.enqueue('idle_$i', '{}', run_at => now() + interval '1 hour');"
		done | q >/dev/null
	fi
	t1=$(date +%s%N)
	create_ms=$([ "$n" -gt "$made" ] && echo "scale=1; ($t1 - $t0) / 1000000 / ($n - $made)" | bc || echo "-")
	made=$n
	rels=$(q -c "SELECT round(count(*)::numeric / greatest($n, 1), 1) FROM pg_class WHERE relnamespace = 'queue'::regnamespace AND relname ~ '^[qasl]_idle_'")
	mb=$(q -c "SELECT round(sum(pg_total_relation_size(oid)) / 1048576.0, 1) FROM pg_class WHERE relnamespace = 'queue'::regnamespace AND relkind IN ('r', 'S')")
	sleep 5
	c0=$(ticks "$worker")
	sleep "$IDLE_SECONDS"
	c1=$(ticks "$worker")
	idle=$(echo "scale=2; 100 * ($c1 - $c0) / $hz / $IDLE_SECONDS" | bc)
	stats_ms=$(best_ms "SELECT count(*) FROM queue.stats")
	jobs_ms=$(best_ms "SELECT count(*) FROM queue.jobs")
	rate=$("$PGBIN/pgbench" -n -M prepared -c 4 -j 4 -T "$ENQ_SECONDS" -f "$TMP/enqueue.sql" -h "$DIR" -p "$PORT" postgres 2>/dev/null |
		awk '/^tps/ {printf "%d", $3}')
	[ -n "$first_rate" ] || first_rate=$rate
	ratio=$(echo "scale=2; $rate / $first_rate" | bc)
	echo "| $n | $create_ms | $rels | $mb | $idle | $stats_ms | $jobs_ms | $rate | $ratio |" >>"$OUT/report.md"
	echo "$n idle queues: create ${create_ms} ms/queue, worker ${idle}% of a core, stats ${stats_ms} ms, enqueue ${rate}/s"
done
echo "== report: $OUT/report.md"
