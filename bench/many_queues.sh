#!/bin/bash
# bench/many_queues.sh: what idle queues cost, and whether a busy queue
# feels them.  Not part of run.sh (a run at 10,000 queues takes about 15
# minutes), like due_stream.sh.
#
#   bash bench/many_queues.sh [COUNTS]          (default "10 1000 10000")
#
# Starts its own cluster (BENCH_DIR/BENCH_PORT, default /tmp/queue_many and
# 54425) with the benchmark's settings and queue.max_queues = 20000, makes
# one busy queue, then idle queues up to each count in turn (one per
# transaction, each holding two jobs: one ready, one scheduled an hour
# out, as in the issue), and at each count reports:
#   - create: seconds per queue for the queues made since the last count;
#   - relations and bytes of schema queue per queue;
#   - the idle worker's CPU, % of a core over IDLE_SECONDS (default 30);
#   - queue.stats, count(*) of queue.jobs and of queue.archive, ms (best
#     of 3), and what a backend that ran them holds in memory;
#   - the busy queue's single-job enqueue rate, 4 pgbench clients for
#     ENQ_SECONDS (default 10), and its ratio to the first count's; then
#     its claim-and-complete rate (one job per call) over what they made;
#   - lateness of a job scheduled 2 s out on a probe queue, taken by a
#     claim(wait =>) that sleeps for it (median and max of 5);
#   - lateness of the notification a LISTENing consumer of the probe queue
#     gets for a job enqueued there (bench/notify_late.py, median and max
#     of 20);
#   - drop: ms per queue, dropping 10 of the idle queues (made again).
# After the last count it restarts the server and reports how long the
# worker takes to visit every queue once (shared memory starts empty, so
# it knows no queue's due time), the memory it holds after that, its CPU
# in the IDLE_SECONDS that follow, and what the first queue.stats costs.
# For comparison it makes 1,000 queues in PGMQ's layout (two tables and
# three indexes per queue, as PGMQ's create makes them; PGMQ itself has no
# Debian package here) and reports their relations and bytes per queue.
# Shared memory per queue is fixed at start for queue.max_queues: it
# reports the server's shared_memory_size at two settings of it, apart.
# Honours PGBIN like run.sh; it never builds.  Writes
# bench/results/<UTC timestamp>-many-queues/report.md.
set -euo pipefail
COUNTS=${1:-"10 1000 10000"}
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
q -c "SELECT queue.create('probe')" >/dev/null
worker=$(worker_pid)
hz=$(getconf CLK_TCK)
echo "SELECT queue.enqueue('busy', '{\"n\": 1}');" >"$TMP/enqueue.sql"
echo "SELECT queue.complete(id) FROM queue.claim('busy');" >"$TMP/claim.sql"

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

catalog_bytes() {
	q -c "SELECT sum(pg_total_relation_size(oid)) FROM pg_class WHERE relnamespace = 'pg_catalog'::regnamespace AND relkind = 'r'"
}
catalog0=$(catalog_bytes)

mkdir -p "$OUT"
{
	echo "# Many queues: idle cost and a busy queue beside them"
	echo
	echo "\`bash bench/many_queues.sh \"$COUNTS\"\` at git $(git -C "$ROOT" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs."
	echo "Idle queues hold two jobs each (one ready, one scheduled an hour out); idle CPU over ${IDLE_SECONDS} s;"
	echo "enqueue: 4 pgbench clients, -M prepared, ${ENQ_SECONDS} s, into the one busy queue."
	echo "Catalog: growth of pg_catalog's tables (with their indexes and TOAST) per queue made."
	echo
	echo "| idle queues | create, ms/queue | drop, ms/queue | relations/queue | MB of schema queue | catalog kB/queue | idle worker, % of a core | queue.stats, ms | count(*) queue.jobs, ms | count(*) queue.archive, ms | backend memory after them, MB | busy enqueue, jobs/s | ratio | busy claim+complete, jobs/s | ratio | scheduled job late, ms (median / max) | notification late, ms (median / max) |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$OUT/report.md"

made=0
first_rate=""
first_claim=""
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
	catalog_kb=$(echo "scale=1; ($(catalog_bytes) - $catalog0) / 1024 / $n" | bc)
	sleep 5
	c0=$(ticks "$worker")
	sleep "$IDLE_SECONDS"
	c1=$(ticks "$worker")
	idle=$(echo "scale=2; 100 * ($c1 - $c0) / $hz / $IDLE_SECONDS" | bc)
	stats_ms=$(best_ms "SELECT count(*) FROM queue.stats")
	jobs_ms=$(best_ms "SELECT count(*) FROM queue.jobs")
	archive_ms=$(best_ms "SELECT count(*) FROM queue.archive")
	mem_mb=$(q -c "SELECT count(*) FROM queue.stats" -c "SELECT count(*) FROM queue.jobs" \
		-c "SELECT count(*) FROM queue.archive" \
		-c "SELECT round(sum(total_bytes) / 1048576.0, 1) FROM pg_backend_memory_contexts" | tail -1)
	rate=$("$PGBIN/pgbench" -n -M prepared -c 4 -j 4 -T "$ENQ_SECONDS" -f "$TMP/enqueue.sql" -h "$DIR" -p "$PORT" postgres 2>/dev/null |
		awk '/^tps/ {printf "%d", $3}')
	claim_rate=$("$PGBIN/pgbench" -n -M prepared -c 4 -j 4 -T "$ENQ_SECONDS" -f "$TMP/claim.sql" -h "$DIR" -p "$PORT" postgres 2>/dev/null |
		awk '/^tps/ {printf "%d", $3}')
	q -c "SELECT queue.purge('busy')" >/dev/null
	[ -n "$first_rate" ] || first_rate=$rate
	[ -n "$first_claim" ] || first_claim=$claim_rate
	ratio=$(echo "scale=2; $rate / $first_rate" | bc)
	claim_ratio=$(echo "scale=2; $claim_rate / $first_claim" | bc)
	late=()
	for _ in 1 2 3 4 5; do
		q -c "SELECT queue.enqueue('probe', jsonb_build_object('due', extract(epoch FROM now() + interval '2 s')),
		                            run_at => now() + interval '2 s')" >/dev/null
		late+=("$(q -c "SELECT round((extract(epoch FROM clock_timestamp()) - (payload->>'due')::float8)::numeric * 1000, 1)
		                  FROM queue.claim('probe', wait => '10 s')")")
		q -c "SELECT queue.purge('probe')" >/dev/null
	done
	late_s=$(printf '%s\n' "${late[@]}" | sort -n | awk '{v[NR] = $1} END {print v[3] " / " v[5]}')
	notify_s=$(/usr/bin/python3 "$HERE/notify_late.py" "host=$DIR port=$PORT user=postgres dbname=postgres" probe 20)
	drop_ms="-"
	if [ "$n" -ge 10 ]; then
		t0=$(date +%s%N)
		for i in $(seq 1 10); do echo "SELECT queue.drop('idle_$i');"; done | q >/dev/null
		t1=$(date +%s%N)
		drop_ms=$(echo "scale=1; ($t1 - $t0) / 1000000 / 10" | bc)
		for i in $(seq 1 10); do
			echo "SELECT queue.create('idle_$i');"
			echo "SELECT queue.enqueue('idle_$i', '{}');"
			echo "SELECT queue.enqueue('idle_$i', '{}', run_at => now() + interval '1 hour');"
		done | q >/dev/null
	fi
	echo "| $n | $create_ms | $drop_ms | $rels | $mb | $catalog_kb | $idle | $stats_ms | $jobs_ms | $archive_ms | $mem_mb | $rate | $ratio | $claim_rate | $claim_ratio | $late_s | $notify_s |" >>"$OUT/report.md"
	echo "$n idle queues: create ${create_ms} ms/queue, worker ${idle}% of a core, stats ${stats_ms} ms, jobs ${jobs_ms} ms, enqueue ${rate}/s, claim ${claim_rate}/s, late ${late_s} ms, notified ${notify_s} ms"
done

# A restart: the worker visits every queue once; it is done when its CPU
# time stops moving for two samples in a row (2 s apart).
su postgres -c "$PGBIN/pg_ctl -D '$DIR/data' -w -m fast restart -l '$DIR/log'" >/dev/null
t0=$(date +%s)
worker=$(worker_pid)
c0=$(ticks "$worker")
prev=-1
still=0
while [ "$still" -lt 2 ]; do
	sleep 2
	now=$(ticks "$worker")
	if [ "$now" = "$prev" ]; then still=$((still + 1)); else still=0; fi
	prev=$now
done
sweep_s=$(($(date +%s) - t0 - 4))
sweep_cpu=$(echo "scale=1; ($prev - $c0) / $hz" | bc)
sweep_rss_mb=$(($(awk '/^RssAnon/ {print $2}' "/proc/$worker/status") / 1024))
c0=$(ticks "$worker")
sleep "$IDLE_SECONDS"
after_idle=$(echo "scale=2; 100 * ($(ticks "$worker") - $c0) / $hz / $IDLE_SECONDS" | bc)
first_stats_ms=$(best_ms "SELECT count(*) FROM queue.stats")

# PGMQ's layout, for its relations and bytes per queue
{
	echo "CREATE SCHEMA pgmq_layout;"
	for i in $(seq 1 1000); do
		echo "CREATE TABLE pgmq_layout.q_$i (msg_id bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY, read_ct int DEFAULT 0 NOT NULL,"
		echo "  enqueued_at timestamptz DEFAULT now() NOT NULL, vt timestamptz NOT NULL, message jsonb);"
		echo "CREATE INDEX ON pgmq_layout.q_$i (vt);"
		echo "CREATE TABLE pgmq_layout.a_$i (msg_id bigint PRIMARY KEY, read_ct int DEFAULT 0 NOT NULL,"
		echo "  enqueued_at timestamptz DEFAULT now() NOT NULL, archived_at timestamptz DEFAULT now() NOT NULL, vt timestamptz NOT NULL, message jsonb);"
		echo "CREATE INDEX ON pgmq_layout.a_$i (archived_at);"
		echo "INSERT INTO pgmq_layout.q_$i (vt, message) VALUES (now(), '{}'), (now() + interval '1 hour', '{}');"
	done
} | q >/dev/null
pgmq_rels=$(q -c "SELECT round(count(*) / 1000.0, 1) FROM pg_class WHERE relnamespace = 'pgmq_layout'::regnamespace")
pgmq_kb=$(q -c "SELECT round(sum(pg_total_relation_size(oid)) / 1000 / 1024.0, 1) FROM pg_class
                 WHERE relnamespace = 'pgmq_layout'::regnamespace AND relkind IN ('r', 'S')")
our_kb=$(q -c "SELECT round(sum(pg_total_relation_size(oid)) / $made / 1024.0, 1) FROM pg_class
                WHERE relnamespace = 'queue'::regnamespace AND relkind IN ('r', 'S')")
{
	echo
	echo "After a restart with $made idle queues: the worker visited them all in about ${sweep_s} s (${sweep_cpu} s of CPU),"
	echo "holding ${sweep_rss_mb} MB (RssAnon) after it, and then used ${after_idle}% of a core over ${IDLE_SECONDS} s;"
	echo "the first queue.stats then took ${first_stats_ms} ms (best of 3, new sessions)."
	echo
	echo "PGMQ's per-queue layout (two tables, three indexes and the identity sequence; counted as ours are, in its schema, without TOAST), 1,000 queues of two messages:"
	echo "${pgmq_rels} relations and ${pgmq_kb} kB per queue; ours here: the relations above and ${our_kb} kB per queue."
} >>"$OUT/report.md"
# Shared memory is sized at start for queue.max_queues: the server's
# shared_memory_size (MB) at two settings, once the cluster is stopped.
shmem_mb() {
	su postgres -c "$PGBIN/postgres -D '$DIR/data' -C shared_memory_size -c queue.max_queues=$1"
}
queue_cluster_stop "$DIR"
shmem_bytes=$(((($(shmem_mb 20000) - $(shmem_mb 1000)) * 1048576) / 19000))
{
	echo
	echo "Shared memory per queue that queue.max_queues makes room for: about ${shmem_bytes} bytes (shared_memory_size"
	echo "at queue.max_queues 20,000 less at 1,000, over 19,000), reserved at start whether the queues exist or not."
} >>"$OUT/report.md"
echo "shared memory: ${shmem_bytes} bytes per queue of queue.max_queues"
echo "restart: worker sweep ${sweep_s} s (${sweep_cpu} s CPU, ${sweep_rss_mb} MB), then ${after_idle}% of a core; first stats ${first_stats_ms} ms; PGMQ layout ${pgmq_rels} relations, ${pgmq_kb} kB per queue"
echo "== report: $OUT/report.md"
