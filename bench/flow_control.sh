#!/bin/bash
# bench/flow_control.sh: what flow control costs a claim.
#
# On a cluster of its own (/tmp/queue_flow, port 54433) it fills four queues
# and measures each one's claim-and-complete rate (one job per call, 4
# pgbench clients, RUN_SECONDS each, in two rounds of alternating order),
# reporting each rate as a ratio to the ungrouped queue's in the same round:
#   fc_plain    ungrouped, no limit;
#   fc_groups   1,000,000 groups of one job, plus 10,000 groups of 20 jobs
#               (group_max_running 1: 19 of each wait), as every grouped
#               queue was before 0.7;
#   fc_groups5  the same with group_max_running 5: the 10,000 groups are
#               over their limit, 15 jobs of each waiting;
#   fc_rate     ungrouped, rate_limit 1,000,000 a second (never binding):
#               the cost of taking and settling tokens.
# Claims never look at waiting jobs (they are not in the ready index), so
# the grouped queues should match each other; both pay the group's next
# job's move at completion, which the ungrouped queues do not.  Writes
# bench/results/<UTC timestamp>-flow-control/report.md.  Honours PGBIN; it
# never builds (run make install first).
set -euo pipefail
NGROUPS=${NGROUPS:-1000000}
OVER=${OVER:-10000}
RUN_SECONDS=${RUN_SECONDS:-10}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DIR=${BENCH_DIR:-/tmp/queue_flow}
PORT=${BENCH_PORT:-54433}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT="$HERE/results/$STAMP-flow-control"
source "$HERE/tools.sh"

fill_grouped() {
	local queue=$1 t0 t1
	t0=$(date +%s)
	q -c "SELECT count(queue.enqueue('$queue', '{}', group_key => 'g' || i)) FROM generate_series(1, $NGROUPS) i" >/dev/null
	q -c "SELECT count(queue.enqueue('$queue', '{}', group_key => 'over' || i)) FROM generate_series(1, $OVER) i,
	        generate_series(1, 20) j" >/dev/null
	t1=$(date +%s)
	echo "$queue: filled in $((t1 - t0)) s: $(q -c "SELECT ready || ' ready, ' || waiting || ' waiting' FROM queue.stats WHERE queue = '$queue'")"
}

q -c "SELECT queue.create('fc_plain'); SELECT queue.create('fc_rate', rate_limit => 1000000);
      SELECT queue.create('fc_groups'); SELECT queue.create('fc_groups5', group_max_running => 5)" >/dev/null
for queue in fc_plain fc_rate; do
	q -c "SELECT count(*) FROM queue.enqueue_batch('$queue', array_fill('{}'::jsonb, ARRAY[$NGROUPS]))" >/dev/null
done
fill_grouped fc_groups
fill_grouped fc_groups5
q -c "VACUUM ANALYZE" >/dev/null

rate() {
	echo "SELECT queue.complete(id) FROM queue.claim('$1');" >"$TMP/claim.sql"
	"$PGBIN/pgbench" -n -M prepared -c 4 -j 4 -T "$RUN_SECONDS" -f "$TMP/claim.sql" -h "$DIR" -p "$PORT" postgres 2>/dev/null |
		awk '/^tps/ {printf "%d", $3}'
}

mkdir -p "$OUT"
{
	echo "# Flow control: what a claim costs"
	echo
	echo "\`bash bench/flow_control.sh\` at git $(git -C "$ROOT" rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs."
	echo "Claim and complete one job per call, 4 pgbench clients (-M prepared), ${RUN_SECONDS} s a run; ratios to fc_plain in the same round."
	echo "Grouped queues: ${NGROUPS} groups of one job and ${OVER} groups of 20 (waiting past group_max_running)."
	echo
	echo "| round | fc_plain, jobs/s | fc_rate (never binding) | fc_groups (group_max_running 1) | fc_groups5 (${OVER} groups over 5) |"
	echo "|---:|---:|---:|---:|---:|"
} >"$OUT/report.md"
for round in 1 2; do
	if [ "$round" = 1 ]; then order="fc_plain fc_rate fc_groups fc_groups5"; else order="fc_groups5 fc_groups fc_rate fc_plain"; fi
	declare -A got=()
	for queue in $order; do
		got[$queue]=$(rate "$queue")
		echo "round $round $queue: ${got[$queue]} jobs/s"
	done
	ratio() { echo "scale=2; ${got[$1]} / ${got[fc_plain]}" | bc; }
	echo "| $round | ${got[fc_plain]} | ${got[fc_rate]} ($(ratio fc_rate)) | ${got[fc_groups]} ($(ratio fc_groups)) | ${got[fc_groups5]} ($(ratio fc_groups5)) |" >>"$OUT/report.md"
	unset got
done
echo "== report: $OUT/report.md"
