#!/bin/bash
# examples/demo.sh: from a fresh Debian bookworm machine (as root) to a
# queue doing its job.  Installs PostgreSQL 15 and the build tools, builds
# and installs the extension, starts a throwaway cluster with the
# background worker, and runs a producer and a consumer that is woken by
# LISTEN/NOTIFY (examples/consumer.py).  The cluster is left running.
set -euo pipefail
cd "$(dirname "$0")/.."
source test/lib.sh

DIR=${QUEUE_DEMO_DIR:-/tmp/queue_demo}
PORT=${QUEUE_DEMO_PORT:-54330}
JOBS=${1:-10}

queue_install_deps
queue_build
queue_cluster_stop "$DIR"
echo "== starting a throwaway cluster in $DIR (port $PORT), shared_preload_libraries = 'queue'"
queue_cluster_start "$DIR" "$PORT"

psql -X -q -c "CREATE EXTENSION queue" -c "SELECT queue.create('emails', backoff_base => '200 ms')" >/dev/null

echo "== consumer: LISTEN queue_emails, then claim and complete (examples/consumer.py)"
err=$(mktemp)
/usr/bin/python3 examples/consumer.py emails "$JOBS" 2>"$err" &
consumer=$!
for _ in $(seq 100); do grep -q '^listening on' "$err" && break; sleep 0.1; done

echo "== producer: $JOBS jobs, one per transaction; the first fails once and is retried"
/usr/bin/python3 examples/producer.py emails "$JOBS" --fail-first 1

wait "$consumer"
sed 's/^/   consumer: /' "$err"
rm -f "$err"

echo "== what the database says"
psql -X -c "SELECT queue, ready, running, dead, completed_last_minute, failed_last_minute FROM queue.stats" \
	-c "SELECT id, attempt, payload, finished_at - enqueued_at AS took FROM queue.archive ORDER BY finished_at LIMIT 5" \
	-c "SELECT * FROM queue.history((SELECT id FROM queue.archive WHERE attempt = 2 LIMIT 1))"

cat <<MSG
== done.  The cluster is still running:
   psql -h $DIR -p $PORT -U postgres          # try SELECT * FROM queue.jobs;
   su postgres -c "$PGBIN/pg_ctl -D $DIR/data stop"
MSG
