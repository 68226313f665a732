#!/bin/bash
# bench/instructions.sh: CPU instructions a backend spends per single-job
# enqueue, against the plain INSERTs it is compared with, and per claim
# and complete of 1 and 100 jobs (in one transaction, and leased: in two),
# counted by callgrind.  The queue's cases run twice: as the superuser
# that owns the queue, and as a role with nothing but its privileges on
# the queue (queue.grant), which the API checks on every call.
#
#   bash bench/instructions.sh               2,000 transactions per statement
#   CALLS=10000 bash bench/instructions.sh
#
# Timed runs on this kind of VM spread by 10-25% from one to the next
# (bench/README.md), which hides a change of a few percent; instruction
# counts hardly move.  The server runs under valgrind --tool=callgrind,
# each process counted on its own; pgbench (-M prepared, one client, as
# bench/ runs single-job enqueue) runs each statement once, then CALLS + 1
# times on a new connection, and the difference between the two backends'
# counts, divided by CALLS, is one transaction: bind, execute, result and
# commit.  The WAL flush's wait and the kernel's work are not instructions
# of the backend and are not counted.
#
# Two builds compare exactly this way: their counts hardly move, where timed
# runs spread by 10-25%.  PGBIN picks the PostgreSQL tree (and the build
# installed in it, with QUEUE_SKIP_BUILD=1), as for bench/run.sh.
#
# As root on Debian: installs valgrind and what test/lib.sh needs, builds
# and installs the extension (QUEUE_SKIP_BUILD=1: not), and writes
# bench/results/<UTC timestamp>-instructions/report.md.  Asserts nothing.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
DIR=${INSTR_DIR:-/tmp/queue_instructions}
PORT=${INSTR_PORT:-54424}
CALLS=${CALLS:-2000}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT="$HERE/results/$STAMP-instructions"

WANT_PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
# shellcheck source=../test/lib.sh
source "$ROOT/test/lib.sh"
PGBIN=$WANT_PGBIN

queue_install_deps
if ! command -v valgrind >/dev/null 2>&1; then
	echo "== installing: valgrind"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
fi
[ "${QUEUE_SKIP_BUILD:-}" = 1 ] || queue_build

# the same settings as bench/run.sh's cluster where they touch a backend's work
queue_cluster_start "$DIR" "$PORT" "fsync = on" "synchronous_commit = on" "full_page_writes = on" \
	"shared_buffers = 1GB" "autovacuum = off"
psql -X -q -v ON_ERROR_STOP=1 -d postgres <<'SQL' >/dev/null
CREATE DATABASE instr;
\c instr
CREATE EXTENSION queue;
SELECT queue.create('q');
-- the raw floor of bench/: a table with its primary key only
CREATE TABLE one_btree (id bigserial PRIMARY KEY, payload jsonb NOT NULL);
-- ... and with a second btree, as queue's table has for the claim order
CREATE TABLE two_btrees (id bigserial PRIMARY KEY, priority int NOT NULL DEFAULT 0, payload jsonb NOT NULL);
CREATE INDEX ON two_btrees (priority DESC, id);
-- the leased cases' first transaction keeps the ids it claimed here for the second
CREATE TABLE claimed (id bigint);
-- a role with the queue's privileges and none on its tables
CREATE ROLE app LOGIN;
SELECT queue.grant('q', 'app', 'all');
GRANT SELECT, INSERT, DELETE ON claimed TO app;
SQL
queue_cluster_stop "$DIR"

WORK=$(mktemp -d)
chown postgres: "$WORK"
stop() {
	su postgres -c "$PGBIN/pg_ctl -D '$DIR/data' -m fast -w stop" >/dev/null 2>&1 || true
	# processes under valgrind may still be writing their counts
	rm -rf "$WORK" 2>/dev/null || { sleep 2; rm -rf "$WORK"; }
}
trap stop EXIT
su postgres -c "cd '$WORK' && valgrind --tool=callgrind --callgrind-out-file='$WORK/cg.%p' \
	$PGBIN/postgres -D '$DIR/data' >'$WORK/server.log' 2>&1 &"
for _ in $(seq 120); do
	"$PGBIN/pg_isready" -q -h "$DIR" -p "$PORT" && break
	sleep 1
done
"$PGBIN/pg_isready" -q -h "$DIR" -p "$PORT" || { cat "$WORK/server.log" >&2; exit 1; }

# name | jobs a transaction takes from the backlog | the pgbench script (one
# statement per line, each a transaction of its own)
CASES=(
	"queue.enqueue()|0|SELECT queue.enqueue('q', :p::jsonb);"
	"INSERT|0|INSERT INTO one_btree (payload) VALUES (:p::jsonb);"
	"INSERT ... RETURNING id|0|INSERT INTO one_btree (payload) VALUES (:p::jsonb) RETURNING id;"
	"the same, second btree|0|INSERT INTO two_btrees (payload) VALUES (:p::jsonb) RETURNING id;"
	"claim 1 + complete, one transaction|1|SELECT queue.complete(id) FROM queue.claim('q', 1);"
	"claim 100 + complete, one transaction|100|SELECT queue.complete(array_agg(id)) FROM queue.claim('q', 100);"
	"claim 1, complete in a second transaction|1|INSERT INTO claimed SELECT id FROM queue.claim('q', 1);
WITH d AS (DELETE FROM claimed RETURNING id) SELECT queue.complete(array_agg(id)) FROM d;"
	"claim 100, complete in a second transaction|100|INSERT INTO claimed SELECT id FROM queue.claim('q', 100);
WITH d AS (DELETE FROM claimed RETURNING id) SELECT queue.complete(array_agg(id)) FROM d;"
	# the same as a role with the queue's privileges ("as app": pgbench -U app)
	"queue.enqueue(), as app|0|SELECT queue.enqueue('q', :p::jsonb);"
	"claim 1 + complete, one transaction, as app|1|SELECT queue.complete(id) FROM queue.claim('q', 1);"
	"claim 100 + complete, one transaction, as app|100|SELECT queue.complete(array_agg(id)) FROM queue.claim('q', 100);"
	"claim 1, complete in a second transaction, as app|1|INSERT INTO claimed SELECT id FROM queue.claim('q', 1);
WITH d AS (DELETE FROM claimed RETURNING id) SELECT queue.complete(array_agg(id)) FROM d;"
	"claim 100, complete in a second transaction, as app|100|INSERT INTO claimed SELECT id FROM queue.claim('q', 100);
WITH d AS (DELETE FROM claimed RETURNING id) SELECT queue.complete(array_agg(id)) FROM d;"
)
PAYLOAD=$(cd "$HERE" && /usr/bin/python3 -c 'import bench; print(bench.make_payload(100))')

# Instructions of the backend of one pgbench run of $1 transactions: the
# process that counted most among those that exited meanwhile (pgbench
# also opens a connection of its own first).
backend() {
	local before after n best=0
	before=$(cd "$WORK" && ls cg.* | sort)
	"$PGBIN/pgbench" -n -M prepared -c 1 -t "$1" -f "$WORK/case.sql" -D "p=$PAYLOAD" -U "$2" instr >/dev/null
	sleep 2   # the backend writes its counts as it exits
	after=$(cd "$WORK" && ls cg.* | sort)
	for f in $(comm -13 <(echo "$before") <(echo "$after")); do
		n=$(sed -n 's/^summary: //p' "$WORK/$f")
		if [ "${n:-0}" -gt "$best" ]; then best=$n; fi
	done
	[ "$best" -gt 0 ] || { echo "no counts for a run of $1 transactions" >&2; exit 1; }
	echo "$best"
}

declare -A PER_CALL
for c in "${CASES[@]}"; do
	name=${c%%|*}
	rest=${c#*|}
	per=${rest%%|*}
	# a claim of 100 costs 100 times what one does: a tenth of the calls
	calls=$CALLS
	[ "$per" -le 1 ] || calls=$((CALLS / 10))
	if [ "$per" -gt 0 ]; then
		# (autovacuum is off: each case starts with no dead rows in claimed)
		echo "TRUNCATE claimed; SELECT count(*) FROM queue.enqueue_batch('q', array_fill(:'p'::jsonb, ARRAY[$(((calls + 2) * per))]));" |
			"$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -v p="$PAYLOAD" -d instr >/dev/null
	fi
	printf '%s\n' "${rest#*|}" >"$WORK/case.sql"
	chmod 644 "$WORK/case.sql"
	user=postgres
	[[ $name != *", as app" ]] || user=app
	one=$(backend 1 "$user")
	all=$(backend $((calls + 1)) "$user")
	PER_CALL[$name]=$(((all - one) / calls))
	echo "== $name: ${PER_CALL[$name]} instructions per transaction"
done

ref=${PER_CALL["INSERT ... RETURNING id"]}
mkdir -p "$OUT"
{
	echo "# Instructions per transaction"
	echo
	echo "\`bash bench/instructions.sh\` with CALLS=$CALLS at git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
	echo "($(date -u '+%Y-%m-%d %H:%M UTC'); $(valgrind --version); $("$PGBIN/postgres" --version))."
	echo "Each statement runs through pgbench \`-M prepared\` with one client, $CALLS transactions after one"
	echo "($((CALLS / 10)) for the claims of 100 jobs, from a backlog enqueued before);"
	echo "the figure is the backend's instructions per transaction (bind, execute, result, commit), counted"
	echo "by callgrind. The payload is the benchmark's ~100-byte JSON object."
	echo
	echo "\"as app\": the same statement run by a role with the queue's privileges only, against the"
	echo "superuser's (the queue's owner)."
	echo
	echo "| statement | instructions per transaction | ratio to INSERT ... RETURNING id | as app / as owner |"
	echo "|---|---:|---:|---:|"
	for c in "${CASES[@]}"; do
		name=${c%%|*}
		owner=${PER_CALL[${name%, as app}]}
		vs=
		[[ $name != *", as app" ]] || vs=$(awk -v a="${PER_CALL[$name]}" -v b="$owner" 'BEGIN { printf "%.3f", a / b }')
		printf '| %s: `%s` | %s | %s | %s |\n' "$name" "$(echo "${c#*|*|}" | tr '\n' ' ')" "${PER_CALL[$name]}" \
			"$(awk -v a="${PER_CALL[$name]}" -v b="$ref" 'BEGIN { printf "%.2f", a / b }')" "$vs"
	done
} >"$OUT/report.md"
echo "== report: $OUT/report.md"
