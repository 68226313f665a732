#!/bin/bash
# bench/due_stream.sh: what a dense stream of scheduled jobs costs, and how
# late its jobs are taken.  Not part of run.sh: a tool for working on the
# extension, like profile.sh.
#
#   bash bench/due_stream.sh [JOBS] [SECONDS] [CONSUMERS] [WORK_MS]
#                            (default 20000 20 2 2)
#
# Starts its own cluster (BENCH_DIR/BENCH_PORT, default /tmp/queue_due and
# 54422) with the benchmark's settings, stores JOBS jobs due evenly over
# SECONDS, and runs CONSUMERS pgbench clients that each claim up to 10 with
# `wait => '1 s'`, spend WORK_MS on them (\sleep) and complete them.  Prints
# the CPU time of the queue's background worker and of all the server's
# processes while they run, and the lateness of the jobs (claimed_at - run_at, from
# queue.archive) at p50 / p99 / max.  The bench's scheduled workload has
# consumers that do no work between claims: then they are nearly always
# waiting, and the worker's share of the promotions never shows.
# Honours PGBIN like run.sh; it never builds.
set -euo pipefail
N=${1:-20000}
SPAN=${2:-20}
CONSUMERS=${3:-2}
WORK_MS=${4:-2}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DIR=${BENCH_DIR:-/tmp/queue_due}
PORT=${BENCH_PORT:-54422}
source "$HERE/tools.sh"
q -c "SELECT queue.create('due')" >/dev/null

# the first due a few seconds after the consumers start, as in run.sh
q -c "SELECT count(*) FROM generate_series(1, $N) i,
        LATERAL queue.enqueue('due', '{\"n\": 1}', run_at => now() + interval '3 s' + (i * $SPAN.0 / $N) * interval '1 s')" >/dev/null
q -c "CHECKPOINT"
cat >"$TMP/consume.sql" <<SQL
SELECT coalesce(array_agg(id), '{}') AS ids FROM queue.claim('due', 10, wait => '1 s') \gset
\sleep $WORK_MS ms
SELECT queue.complete(:ids::bigint[]);
SQL

worker=$(worker_pid)
w0=$(ticks "$worker")
m0=$(server)
"$PGBIN/pgbench" -n -M prepared -c "$CONSUMERS" -j "$CONSUMERS" -T $((SPAN + 4)) -f "$TMP/consume.sql" >"$TMP/out" 2>&1 ||
	{ cat "$TMP/out"; exit 1; }
w1=$(ticks "$worker")
m1=$(server)
hz=$(getconf CLK_TCK)
left=$(q -c "SELECT count(*) FROM queue.q_due")
echo "$N jobs due over $SPAN s, $CONSUMERS consumers (claim 10, wait 1 s, $WORK_MS ms of work per claim), $(nproc) CPUs"
awk -v w=$((w1 - w0)) -v m=$((m1 - m0)) -v hz="$hz" -v left="$left" \
	'BEGIN { printf "worker CPU: %.2f s; server CPU: %.2f s; jobs left: %d\n", w / hz, m / hz, left }'
q -F ' / ' -c "SELECT 'lateness p50 / p99 / max (ms)',
        round(extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY claimed_at - run_at)) * 1000, 2),
        round(extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY claimed_at - run_at)) * 1000, 2),
        round(extract(epoch FROM max(claimed_at - run_at)) * 1000, 2)
   FROM queue.archive"
