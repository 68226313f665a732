#!/bin/bash
# bench/profile.sh: where the time of one queue operation goes, next to the
# baseline's.  Not part of run.sh: a tool for working on the extension.
#
#   bash bench/profile.sh [SECONDS]     (default 10 s per case)
#
# Starts its own cluster (BENCH_DIR/BENCH_PORT, default /tmp/queue_profile
# and 54421) with pg_stat_statements (track = all, so the statements that
# the extension runs through SPI show up), then for each case runs pgbench
# with 4 clients and prints: tps, the top statements by total time
# (nested ones included), the WAL written per job, and, if perf is
# installed, the hottest functions of the server.  Cases:
#   enqueue   queue.enqueue vs INSERT into the baseline table
#   drain1    claim 1 + complete in one transaction
#   leased1   claim 1, complete in a second transaction
#   leased100 claim 100 reading the payloads, complete in a second
#             transaction (FILL jobs per queue, default 1,000,000)
#   group1    claim 100 + complete with every job in one group_key
#   explain   EXPLAIN (ANALYZE, BUFFERS) of each claim statement
# Honours PGBIN and QUEUE_SKIP_BUILD like run.sh (it never builds).
set -euo pipefail
SECS=${1:-10}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
WANT_PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
DIR=${BENCH_DIR:-/tmp/queue_profile}
PORT=${BENCH_PORT:-54421}
CASES=${CASES:-enqueue drain1 leased1 group1 explain}
HQ=${HQ:-pq0}     # horizon case: pq (archive) or pq0 (no archive)
HOLD=${HOLD:-xid} # horizon case: xid (idle in transaction) or rr (REPEATABLE READ)
source "$ROOT/test/lib.sh"
PGBIN=$WANT_PGBIN
trap 'queue_cluster_stop "$DIR"' EXIT
queue_cluster_start "$DIR" "$PORT" "fsync = on" "shared_buffers = 1GB" "max_wal_size = 8GB" \
	"checkpoint_timeout = 30min" "shared_preload_libraries = 'queue,pg_stat_statements'" \
	"pg_stat_statements.track = all" "pg_stat_statements.track_planning = on" "track_io_timing = on"
export PGDATABASE=postgres
P='{"user_id": 12345, "email": "someone@example.com", "template": "welcome", "locale": "en-GB", "n": 1}'
q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }
q -c "CREATE EXTENSION queue" -c "CREATE EXTENSION pg_stat_statements"
q <<'SQL'
SELECT queue.create('pq');
SELECT queue.create('pq0', retention => '0');
SELECT queue.create('pg1');
CREATE TABLE base (id bigserial PRIMARY KEY, payload jsonb NOT NULL, run_at timestamptz NOT NULL DEFAULT now(),
                   locked_until timestamptz, attempts int NOT NULL DEFAULT 0, enqueued_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX ON base (run_at, id) WHERE locked_until IS NULL;
CREATE INDEX ON base (locked_until) WHERE locked_until IS NOT NULL;
SQL
TMP=$(mktemp -d)
CLAIM_BASE="UPDATE base SET locked_until = now() + interval '30 seconds', attempts = attempts + 1 WHERE id IN (SELECT id FROM base WHERE locked_until IS NULL AND run_at <= now() ORDER BY run_at, id FOR UPDATE SKIP LOCKED LIMIT"

fill() { # fill N
	q -c "SELECT count(*) FROM queue.enqueue_batch('pq', (SELECT array_agg('$P'::jsonb) FROM generate_series(1, $1)))" \
	  -c "SELECT count(*) FROM queue.enqueue_batch('pq0', (SELECT array_agg('$P'::jsonb) FROM generate_series(1, $1)))" \
	  -c "INSERT INTO base (payload) SELECT '$P' FROM generate_series(1, $1)" \
	  -c "VACUUM ANALYZE queue.q_pq, queue.q_pq0, base" -c CHECKPOINT >/dev/null
}

run() { # run NAME SCRIPT
	local name=$1 script=$2 perfpid=""
	echo "$script" >"$TMP/s.sql"
	q -c "SELECT pg_stat_statements_reset()" >/dev/null
	local wal0
	wal0=$(q -c "SELECT pg_current_wal_lsn()")
	if command -v perf >/dev/null && [ -z "${NO_PERF:-}" ]; then
		perf record -q -a -g -o "$TMP/perf.data" -- sleep "$SECS" >/dev/null 2>&1 &
		perfpid=$!
	fi
	local out
	out=$("$PGBIN/pgbench" -n -M prepared -c 4 -j 2 -T "$SECS" -D "p=$P" -f "$TMP/s.sql" 2>&1)
	[ -n "$perfpid" ] && wait "$perfpid" || true
	local tx
	tx=$(echo "$out" | sed -n 's/^number of transactions actually processed: //p')
	echo "### $name: $(echo "$out" | grep '^tps' | head -1), $(q -c "SELECT pg_size_pretty((pg_current_wal_lsn() - '$wal0')::bigint / greatest($tx, 1))") WAL per transaction"
	echo '```'
	echo "$script"
	echo '```'
	echo "| calls | plans | plan ms (total) | mean exec ms | total exec ms | rows | shared hit | dirtied | statement |"
	echo "|---:|---:|---:|---:|---:|---:|---:|---:|---|"
	q -F ' | ' -c "SELECT calls, plans, round(total_plan_time::numeric), round(mean_exec_time::numeric, 4), round(total_exec_time::numeric), rows,
	                      shared_blks_hit, shared_blks_dirtied, left(regexp_replace(query, '\s+', ' ', 'g'), 150)
	               FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
	               ORDER BY total_exec_time DESC LIMIT 8" | sed 's/^/| /; s/$/ |/'
	if [ -n "$perfpid" ] && [ -f "$TMP/perf.data" ]; then
		echo
		echo "hottest functions (perf, all CPUs, self time):"
		echo '```'
		perf report -i "$TMP/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null >"$TMP/perf.txt" || true
		grep -E '^ +[0-9.]+%' "$TMP/perf.txt" | grep -v '\[k\]' | head -20 || true
		echo '```'
		rm -f "$TMP/perf.data"
	fi
	echo
}

for c in $CASES; do
	case $c in
	enqueue)
		run "queue.enqueue (archive queue)" "SELECT queue.enqueue('pq', :p::jsonb);"
		run "baseline INSERT" "INSERT INTO base (payload) VALUES (:p::jsonb);"
		;;
	drain1)
		fill 200000
		run "queue claim 1 + complete, one txn" "BEGIN;
SELECT coalesce(max(id), 0) AS id FROM queue.claim('pq', 1) \gset
SELECT queue.complete(:id::bigint);
COMMIT;"
		run "queue (no archive) claim 1 + complete, one txn" "BEGIN;
SELECT coalesce(max(id), 0) AS id FROM queue.claim('pq0', 1) \gset
SELECT queue.complete(:id::bigint);
COMMIT;"
		run "baseline claim 1 + delete, one txn" "BEGIN;
WITH c AS ($CLAIM_BASE 1) RETURNING id) SELECT coalesce(max(id), 0) AS id FROM c \gset
DELETE FROM base WHERE id = :id::bigint;
COMMIT;"
		;;
	leased1)
		fill 200000
		run "queue claim 1, complete in a 2nd txn" "SELECT coalesce(max(id), 0) AS id, max(attempt) AS att FROM queue.claim('pq', 1) \gset
SELECT queue.complete(:id::bigint, attempt => :att::int);"
		run "baseline claim 1, delete in a 2nd txn" "WITH c AS ($CLAIM_BASE 1) RETURNING id) SELECT coalesce(max(id), 0) AS id FROM c \gset
DELETE FROM base WHERE id = :id::bigint;"
		;;
	leased100)
		fill "${FILL:-1000000}"
		run "queue claim 100 reading payloads, complete in a 2nd txn" "SELECT coalesce(array_agg(id), '{}') AS ids, string_agg(payload::text, ',') AS payloads FROM queue.claim('pq', 100) \gset
SELECT queue.complete(:ids::bigint[]);"
		run "queue (no archive) claim 100 reading payloads, complete in a 2nd txn" "SELECT coalesce(array_agg(id), '{}') AS ids, string_agg(payload::text, ',') AS payloads FROM queue.claim('pq0', 100) \gset
SELECT queue.complete(:ids::bigint[]);"
		;;
	group1)
		q -c "SELECT count(queue.enqueue('pg1', '$P'::jsonb, group_key => 'g')) FROM generate_series(1, 20000)" \
		  -c "VACUUM ANALYZE queue.q_pg1" >/dev/null
		run "queue claim 100 + complete, one group_key" "BEGIN;
SELECT coalesce(array_agg(id), '{}') AS ids FROM queue.claim('pg1', 100) \gset
SELECT queue.complete(:ids::bigint[]);
COMMIT;"
		echo "group index after the run:"
		q -c "SELECT relname, pg_size_pretty(pg_relation_size(oid)) FROM pg_class WHERE relname LIKE 'q_pg1%' ORDER BY 1"
		;;
	horizon)
		# claim cost per call before and while an idle transaction with an xid
		# holds the horizon: producer and consumers at 800 jobs/s each
		q -c "SELECT count(*) FROM queue.enqueue_batch('pq0', (SELECT array_agg('$P'::jsonb) FROM generate_series(1, 20000)))" \
		  -c "VACUUM ANALYZE queue.q_pq0" -c CHECKPOINT >/dev/null
		echo "SELECT queue.enqueue('$HQ', :p::jsonb);" >"$TMP/prod.sql"
		printf 'BEGIN;\nSELECT coalesce(max(id), 0) AS id FROM queue.claim(%s, 1) \\gset\nSELECT queue.complete(:id::bigint);\nCOMMIT;\n' "'$HQ'" >"$TMP/cons.sql"
		"$PGBIN/pgbench" -n -M prepared -c 2 -j 2 -R 800 -T 100 -D "p=$P" -f "$TMP/prod.sql" >/dev/null 2>&1 &
		local_p=$!
		"$PGBIN/pgbench" -n -M prepared -c 2 -j 2 -R 800 -T 100 -f "$TMP/cons.sql" >"$TMP/cons.out" 2>&1 &
		local_c=$!
		snap() { q -F ' | ' -c "SELECT '$1', calls, round(mean_exec_time::numeric, 3), round(shared_blks_hit::numeric / greatest(calls, 1), 1),
		                                left(regexp_replace(query, '\s+', ' ', 'g'), 60)
		                         FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC LIMIT 4"; }
		echo "### $HQ, holder $HOLD: phase | calls | mean ms | shared buffers hit per call | statement"
		sleep 10; q -c "SELECT pg_stat_statements_reset()" >/dev/null; sleep 15; snap "clean (15 s)"
		if [ "$HOLD" = rr ]; then
			( q -c "BEGIN ISOLATION LEVEL REPEATABLE READ" -c "SELECT count(*) FROM pg_class" -c "SELECT pg_sleep(60)" -c "COMMIT" >/dev/null ) &
		else
			( q -c "BEGIN" -c "SELECT txid_current()" -c "SELECT pg_sleep(60)" -c "COMMIT" >/dev/null ) &
		fi
		hold=$!
		for i in 1 2 3 4; do q -c "SELECT pg_stat_statements_reset()" >/dev/null; sleep 15; snap "held, $((i * 15)) s"; done
		wait $hold
		q -c "SELECT pg_stat_statements_reset()" >/dev/null; sleep 10; snap "after (10 s)"
		wait $local_p $local_c || true
		grep -E "^tps|latency average|error|abort" "$TMP/cons.out" | head -5 || true
		;;
	explain)
		fill 100000
		echo "### EXPLAIN (ANALYZE, BUFFERS), rolled back"
		echo '```'
		q -c "BEGIN" -c "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) $CLAIM_BASE 1) RETURNING id" -c "ROLLBACK"
		q -c "BEGIN" -c "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) WITH d AS (DELETE FROM queue.q_pq WHERE id = ANY (ARRAY(SELECT id FROM queue.q_pq WHERE state = 'ready' ORDER BY priority DESC, rank LIMIT 1 FOR UPDATE SKIP LOCKED)) RETURNING *) SELECT id FROM d" -c "ROLLBACK"
		echo '```'
		;;
	esac
done
rm -rf "$TMP"
