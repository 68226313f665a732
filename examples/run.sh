#!/bin/bash
# examples/run.sh: run the example consumers end to end and check that every
# job was completed exactly once.
#
#   examples/run.sh [N]        (N jobs per case, default 200)
#
# Uses the cluster and database given by the usual PG* environment variables
# (PGHOST, PGPORT, PGUSER, PGDATABASE); the server must have queue in
# shared_preload_libraries (the consumers are woken by the background
# worker's NOTIFYs).  Installs the extension in that database if missing,
# builds the C consumer with examples/Makefile (pg_config from PATH, or
# PG_CONFIG=...), and runs /usr/bin/python3 (PYTHON=... to change) with
# psycopg2 for the Python ones.
#
# For each case: create a queue, start the consumer(s) in the background,
# wait until they are LISTENing, enqueue N jobs with producer.py, wait for
# the consumers to exit (timeout), then check with SQL that every job is in
# queue.archive exactly once, done, and that queue.jobs holds nothing of
# the queue.  Prints "ok N - ..." / "not ok N - ..." lines; exits non-zero
# on any failure.
#
# The consumers wait for notifications with a 60 s safety-net poll, longer
# than the case timeout: a missing wakeup makes the case fail instead of
# passing slowly.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
N=${1:-200}
PYTHON=${PYTHON:-/usr/bin/python3}
PG_CONFIG=${PG_CONFIG:-pg_config}
CASE_TIMEOUT=${CASE_TIMEOUT:-20}
TMP=$(mktemp -d /tmp/queue_examples.XXXXXX)
QUEUES=()
PIDS=()

cleanup() {
	local p q
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	for q in "${QUEUES[@]}"; do
		psql -X -q -o /dev/null -c "SELECT queue.drop('$q', if_exists => true)" 2>/dev/null
	done
	rm -rf "$TMP"
}
trap cleanup EXIT

tests=0
failures=0
ok() {
	tests=$((tests + 1))
	echo "ok $tests - $*"
}
not_ok() {
	tests=$((tests + 1))
	failures=$((failures + 1))
	echo "not ok $tests - $*"
}
# check DESCRIPTION EXPECTED ACTUAL
check() {
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		not_ok "$1"
		echo "#   expected: $2"
		echo "#        got: $3"
	fi
}
sql() {
	psql -X -q -At -v ON_ERROR_STOP=1 -c "$1"
}
bail() {
	echo "Bail out! $*"
	exit 1
}

# ---------------------------------------------------------------- setup
sql "SELECT 1" >/dev/null || bail "cannot connect (check PGHOST, PGPORT, PGUSER, PGDATABASE)"
sql "CREATE EXTENSION IF NOT EXISTS queue" >/dev/null 2>&1 || bail "cannot create extension queue"
"$PYTHON" -c "import psycopg2" 2>/dev/null || bail "$PYTHON has no psycopg2 (apt-get install python3-psycopg2)"
if make -s -C "$HERE" PG_CONFIG="$PG_CONFIG" consumer >"$TMP/make.log" 2>&1; then
	ok "C consumer builds"
else
	not_ok "C consumer builds"
	sed 's/^/#   /' "$TMP/make.log"
fi

# The worker that sends NOTIFYs starts when the extension's database is
# registered; give it a moment after a fresh CREATE EXTENSION.
worker=""
for _ in $(seq 100); do
	worker=$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'queue worker' AND datname = current_database()")
	[ "$worker" = 1 ] && break
	sleep 0.1
done
check "the background worker serves database $(sql 'SELECT current_database()')" 1 "$worker"

# wait_listening FILE...: until each consumer has printed "listening on".
wait_listening() {
	local f
	for _ in $(seq 100); do
		for f in "$@"; do
			grep -q '^listening on' "$f" 2>/dev/null || continue 2
		done
		return 0
	done
	return 1
}

# run_case NAME CONSUMERS FAIL_FIRST PRODUCER_ARGS -- CONSUMER_COMMAND...
#   Starts CONSUMERS copies of CONSUMER_COMMAND QUEUE N/CONSUMERS, then
#   producer.py QUEUE N PRODUCER_ARGS --fail-first FAIL_FIRST.
run_case() {
	local name=$1 nc=$2 fail_first=$3 pargs=$4
	shift 5
	local q="ex_${name//-/_}_$$"
	local i pid rc status=0 errs=()
	local start end
	QUEUES+=("$q")

	echo "# $name: $nc consumer(s), $N jobs, producer.py $pargs --fail-first $fail_first"
	sql "SELECT queue.create('$q', backoff_base => '100 ms')" >/dev/null || { not_ok "$name: create queue"; return; }

	local pids=()
	for i in $(seq "$nc"); do
		# the first N % nc consumers take one job more than the others
		"$@" "$q" $((N / nc + (i <= N % nc))) >"$TMP/$q.$i.out" 2>"$TMP/$q.$i.err" &
		pids+=($!)
		PIDS+=($!)
		errs+=("$TMP/$q.$i.err")
	done
	if ! wait_listening "${errs[@]}"; then
		not_ok "$name: consumers LISTEN"
		cat "${errs[@]}" | sed 's/^/#   /'
		return
	fi

	start=$(date +%s%N)
	# shellcheck disable=SC2086
	"$PYTHON" "$HERE/producer.py" "$q" "$N" $pargs --fail-first "$fail_first" 2>"$TMP/$q.producer" ||
		{ not_ok "$name: producer"; sed 's/^/#   /' "$TMP/$q.producer"; }

	# wait for every consumer, up to CASE_TIMEOUT seconds in all
	for pid in "${pids[@]}"; do
		rc=""
		while [ $(( ($(date +%s%N) - start) / 1000000000 )) -lt "$CASE_TIMEOUT" ]; do
			if ! kill -0 "$pid" 2>/dev/null; then
				wait "$pid"
				rc=$?
				break
			fi
			sleep 0.05
		done
		if [ -z "$rc" ]; then
			kill "$pid" 2>/dev/null
			wait "$pid" 2>/dev/null
			status=1
			echo "#   consumer $pid still running after ${CASE_TIMEOUT}s: killed"
		elif [ "$rc" != 0 ]; then
			status=1
			echo "#   consumer $pid exited with status $rc"
		fi
	done
	end=$(date +%s%N)
	if [ "$status" = 0 ]; then
		ok "$name: consumers processed $N jobs and exited ($(( (end - start) / 1000000 )) ms)"
	else
		not_ok "$name: consumers processed $N jobs and exited"
	fi
	grep -h -v '^listening on' "${errs[@]}" | sed 's/^/#   /'

	# what the consumers say they did
	cat "$TMP/$q".*.out | awk '$1 == "job" { print $2 }' | sort >"$TMP/$q.ids"
	check "$name: consumers reported $N completions" "$N" "$(wc -l <"$TMP/$q.ids")"
	check "$name: no job reported twice" "" "$(uniq -d "$TMP/$q.ids" | head -3 | tr '\n' ' ')"

	# what the database says
	check "$name: queue.archive holds each job once, done, payloads 1..$N" \
		"$N|$N|$N|1|$N" \
		"$(sql "SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE state = 'done'),
		              min((payload->>'n')::int), max((payload->>'n')::int) + count(*) - count(DISTINCT payload->>'n')
		         FROM queue.archive WHERE queue = '$q'")"
	check "$name: queue.jobs holds nothing of the queue" 0 \
		"$(sql "SELECT count(*) FROM queue.jobs WHERE queue = '$q'")"
	check "$name: the archived ids are the ids the consumers reported" "" \
		"$(sql "SELECT id FROM queue.archive WHERE queue = '$q'" | sort | diff - "$TMP/$q.ids" | head -5)"
	check "$name: jobs failing once took 2 attempts, the others 1" "$fail_first|$((N - fail_first))" \
		"$(sql "SELECT count(*) FILTER (WHERE attempt = 2 AND payload ? 'fail_first_attempt'),
		              count(*) FILTER (WHERE attempt = 1 AND NOT payload ? 'fail_first_attempt')
		         FROM queue.archive WHERE queue = '$q'")"
}

# ---------------------------------------------------------------- cases
# Python, exactly-once, one job per producer transaction, some jobs failing
# on their first attempt (retried after the 100 ms backoff).
run_case py-exactly-once 1 3 "" -- \
	"$PYTHON" "$HERE/consumer.py" --batch 10 --poll 60
# Python, leased (at-least-once), two consumers sharing the queue, batches.
run_case py-leased 2 3 "--batch 25" -- \
	"$PYTHON" "$HERE/consumer.py" --leased --batch 10 --poll 60
# C, exactly-once, two consumers, batches.
if [ -x "$HERE/consumer" ]; then
	run_case c-exactly-once 2 0 "--batch 50" -- \
		"$HERE/consumer" --batch 10 --poll 60
fi

echo "1..$tests"
if [ "$failures" -ne 0 ]; then
	echo "# $failures of $tests failed"
	exit 1
fi
echo "# all $tests passed"
