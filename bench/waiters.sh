#!/bin/bash
# bench/waiters.sh: what many consumers waiting in claim(wait =>) cost the
# server per job.  Not part of run.sh: a tool for working on the extension,
# like profile.sh and due_stream.sh.
#
#   bash bench/waiters.sh [CONSUMERS] [RATE] [SECONDS] [DELAY]
#                                            (default 32 200 15 0)
#
# Starts its own cluster (BENCH_DIR/BENCH_PORT, default /tmp/queue_waiters
# and 54423) with the benchmark's settings, and runs for SECONDS one pgbench
# producer that enqueues RATE jobs a second, one per transaction (-R), and
# CONSUMERS pgbench clients that each claim one job with `wait => '5 s'` and
# complete it.  Prints the CPU time of all the server's processes per job,
# and claimed_at - enqueued_at (from queue.archive) at p50 / p99 / max: the
# time from the producer's statement, its commit's flush included, to the
# claim.  With DELAY (seconds) the producer schedules each job DELAY after
# it enqueues it (run_at => now() + DELAY), so that jobs fall due at RATE a
# second while the consumers wait, and the figures are claimed_at - run_at:
# lateness.  The suite's latency and scheduled workloads have two
# consumers, where waking all of them for every job costs little.
# Honours PGBIN like run.sh; it never builds.
set -euo pipefail
CONSUMERS=${1:-32}
RATE=${2:-200}
SECS=${3:-15}
DELAY=${4:-0}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DIR=${BENCH_DIR:-/tmp/queue_waiters}
PORT=${BENCH_PORT:-54423}
source "$HERE/tools.sh"
q -c "SELECT queue.create('w')" >/dev/null
q -c "CHECKPOINT"
if [ "$DELAY" = 0 ]; then
	echo "SELECT queue.enqueue('w', '{\"n\": 1}');" >"$TMP/produce.sql"
	since=enqueued_at
else
	echo "SELECT queue.enqueue('w', '{\"n\": 1}', run_at => now() + interval '$DELAY s');" >"$TMP/produce.sql"
	since=run_at
fi
cat >"$TMP/consume.sql" <<SQL
SELECT coalesce(array_agg(id), '{}') AS ids FROM queue.claim('w', 1, wait => '5 s') \gset
SELECT queue.complete(:ids::bigint[]);
SQL

m0=$(server)
"$PGBIN/pgbench" -n -M prepared -c "$CONSUMERS" -j 2 -T $((SECS + 1 + ${DELAY%.*})) -f "$TMP/consume.sql" >"$TMP/consume.out" 2>&1 &
consumers=$!
sleep 0.5
"$PGBIN/pgbench" -n -M prepared -c 1 -R "$RATE" -T "$SECS" -f "$TMP/produce.sql" >"$TMP/produce.out" 2>&1 ||
	{ cat "$TMP/produce.out"; exit 1; }
wait $consumers || { cat "$TMP/consume.out"; exit 1; }
m1=$(server)
hz=$(getconf CLK_TCK)
jobs=$(q -c "SELECT count(*) FROM queue.archive")
left=$(q -c "SELECT count(*) FROM queue.q_w")
echo "$CONSUMERS consumers (claim 1, wait 5 s, complete), a producer at $RATE jobs/s for $SECS s (due after $DELAY s), $(nproc) CPUs"
awk -v m=$((m1 - m0)) -v hz="$hz" -v jobs="$jobs" -v left="$left" \
	'BEGIN { printf "jobs done: %d, left: %d; server CPU: %.2f s, %.0f us per job\n", jobs, left, m / hz, m / hz * 1e6 / (jobs > 0 ? jobs : 1) }'
q -F ' / ' -c "SELECT 'claimed_at - $since p50 / p99 / max (ms)',
        round(extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY claimed_at - $since)) * 1000, 2),
        round(extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY claimed_at - $since)) * 1000, 2),
        round(extract(epoch FROM max(claimed_at - $since)) * 1000, 2)
   FROM queue.archive"
