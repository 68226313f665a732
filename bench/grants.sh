#!/bin/bash
# bench/grants.sh: what the privilege check costs the hot path, timed.
# The same statements as the queue's owner (a superuser) and as a role
# with nothing but the queue's privileges (queue.grant), interleaved in
# one run, as ratios.  Not part of run.sh; bench/instructions.sh counts
# the same cases' instructions, which hardly move from run to run.
#
#   bash bench/grants.sh            3 rounds of 10 s per cell
#   ROUNDS=5 SECONDS_PER=20 bash bench/grants.sh
#
# Cells, each with 4 pgbench clients (-M prepared): single-job enqueue;
# claim 1 + complete in one transaction; claim 10 + complete in one
# transaction, from a backlog enqueued before each round.  Starts its own
# cluster (BENCH_DIR/BENCH_PORT, default /tmp/queue_grants and 54426) with
# the benchmark's settings; honours PGBIN; never builds.  Writes
# bench/results/<UTC timestamp>-grants/report.md.  Asserts nothing.
set -euo pipefail
ROUNDS=${ROUNDS:-3}
SECONDS_PER=${SECONDS_PER:-10}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DIR=${BENCH_DIR:-/tmp/queue_grants}
PORT=${BENCH_PORT:-54426}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT="$HERE/results/$STAMP-grants"
source "$HERE/tools.sh"

q <<'SQL' >/dev/null
SELECT queue.create('q');
CREATE ROLE app LOGIN;
SELECT queue.grant('q', 'app', 'all');
SQL
PAYLOAD='{"to": "someone@example.com", "subject": "hello", "body": "a payload of about a hundred bytes"}'
echo "SELECT queue.enqueue('q', :p::jsonb);" >"$TMP/enqueue.sql"
echo "SELECT queue.complete(id) FROM queue.claim('q', 1);" >"$TMP/claim1.sql"
echo "SELECT queue.complete(coalesce(array_agg(id), '{}')) FROM queue.claim('q', 10);" >"$TMP/claim10.sql"
chmod 644 "$TMP"/*.sql

# tps of script $1 as role $2
tps() {
	"$PGBIN/pgbench" -n -M prepared -c 4 -j 2 -T "$SECONDS_PER" -f "$TMP/$1.sql" -D "p=$PAYLOAD" -U "$2" postgres |
		sed -n 's/^tps = \([0-9.]*\) .*/\1/p'
}
# $1 jobs ready (more than a cell's clients take in SECONDS_PER)
backlog() {
	q -c "TRUNCATE queue.q_q" -c "VACUUM queue.q_q" >/dev/null
	echo "SELECT count(*) FROM queue.enqueue_batch('q', array_fill(:'p'::jsonb, ARRAY[$1]));" | q -v p="$PAYLOAD" >/dev/null
}

declare -A T
CELLS="enqueue claim1 claim10"
for r in $(seq "$ROUNDS"); do
	for cell in $CELLS; do
		# owner first in odd rounds, the role first in even ones
		users="postgres app"
		[ $((r % 2)) -eq 1 ] || users="app postgres"
		for u in $users; do
			case $cell in
			claim1) backlog $((30000 * SECONDS_PER)) ;;
			claim10) backlog $((100000 * SECONDS_PER)) ;;
			esac
			T[$cell,$u,$r]=$(tps "$cell" "$u")
			echo "== round $r $cell as $u: ${T[$cell,$u,$r]} tps"
		done
	done
done

median() { tr ' ' '\n' | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
mkdir -p "$OUT"
{
	echo "# The privilege check on the hot path, timed"
	echo
	echo "\`bash bench/grants.sh\` at git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)," \
		"$(date -u '+%Y-%m-%d %H:%M UTC'): $ROUNDS rounds of $SECONDS_PER s per cell, 4 pgbench clients," \
		"the two roles interleaved. \"owner\": the superuser that owns the queue; \"app\": a role with all" \
		"privileges on the queue (queue.grant) and none on its tables."
	echo
	echo "| cell | owner tps (median) | app tps (median) | app / owner | rounds (owner / app) |"
	echo "|---|---:|---:|---:|---|"
	for cell in $CELLS; do
		o=""; a=""; each=""
		for r in $(seq "$ROUNDS"); do
			o="$o ${T[$cell,postgres,$r]}"; a="$a ${T[$cell,app,$r]}"
			each="$each ${T[$cell,postgres,$r]%.*}/${T[$cell,app,$r]%.*}"
		done
		mo=$(echo $o | median); ma=$(echo $a | median)
		printf '| %s | %.0f | %.0f | %.2f | %s |\n' "$cell" "$mo" "$ma" \
			"$(awk -v a="$ma" -v b="$mo" 'BEGIN { print a / b }')" "${each# }"
	done
} >"$OUT/report.md"
cat "$OUT/report.md"
