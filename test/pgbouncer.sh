#!/bin/bash
# test/pgbouncer.sh: the queue extension behind PgBouncer in transaction
# pooling mode.
#
#   test/pgbouncer.sh
#
# Starts Debian's pgbouncer (PGBOUNCER=/usr/sbin/pgbouncer) on 127.0.0.1 at
# a free port, in front of the cluster and database given by the PG*
# environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE), with
# pool_mode = transaction and default_pool_size = 2.  As root it runs
# pgbouncer as the postgres OS user (pgbouncer refuses root).  Needs
# /usr/bin/python3 with psycopg2 (PYTHON=... to change) and queue in the
# server's shared_preload_libraries (claim with wait).
#
#   (a) claim(wait => '5 s') through pgbouncer returns a job enqueued by
#       another pgbouncer client ~300 ms later, within 1 s of the enqueue.
#   (b) 8 clients sharing 2 server connections, each looping
#       BEGIN; claim(wait => '1 s'); complete; COMMIT, drain 200 jobs
#       enqueued while they run: every job completed exactly once.
#   (c) informational: LISTEN through transaction pooling does not follow
#       the client (no assertion).
#
# Prints "ok N - ..." / "not ok N - ..." lines; exits non-zero on failure.
set -u

PGBOUNCER=${PGBOUNCER:-/usr/sbin/pgbouncer}
PYTHON=${PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d /tmp/queue_pgbouncer.XXXXXX)
BOUNCER_PID=""

# Whether a process runs (a daemon that exited stays a zombie until
# init reaps it, which some container inits take their time to do).
running() {
	local state=""
	[ -r "/proc/$1/stat" ] && read -r _ _ state _ <"/proc/$1/stat" 2>/dev/null
	[ -n "$state" ] && [ "$state" != Z ]
}
stop_bouncer() {
	if [ -n "$BOUNCER_PID" ] && running "$BOUNCER_PID"; then
		kill -TERM "$BOUNCER_PID" 2>/dev/null	# SIGTERM: immediate shutdown
		for _ in $(seq 50); do
			running "$BOUNCER_PID" || break
			sleep 0.1
		done
	fi
	BOUNCER_PID=""
}
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
	stop_bouncer
	rm -rf "$TMP"
}
trap cleanup EXIT

bail() {
	echo "Bail out! $*"
	[ -f "$TMP/pgbouncer.log" ] && sed 's/^/#   /' "$TMP/pgbouncer.log" | tail -20
	exit 1
}

[ -x "$PGBOUNCER" ] || bail "no pgbouncer at $PGBOUNCER (apt-get install pgbouncer)"
"$PYTHON" -c "import psycopg2" 2>/dev/null || bail "$PYTHON has no psycopg2 (apt-get install python3-psycopg2)"
psql -X -q -c "CREATE EXTENSION IF NOT EXISTS queue" >/dev/null 2>&1 ||
	bail "cannot connect or create extension queue (check PGHOST, PGPORT, PGUSER, PGDATABASE)"

# ---------------------------------------------------------------- pgbouncer
user=${PGUSER:-$(id -un)}
server_host=${PGHOST:-/var/run/postgresql}
server_port=${PGPORT:-5432}
port=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

echo "\"$user\" \"\"" >"$TMP/userlist.txt"
cat >"$TMP/pgbouncer.ini" <<INI
[databases]
* = host=$server_host port=$server_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $TMP/userlist.txt
pool_mode = transaction
default_pool_size = 2
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 100
logfile = $TMP/pgbouncer.log
pidfile = $TMP/pgbouncer.pid
admin_users = $user
ignore_startup_parameters = extra_float_digits
INI

if [ "$(id -u)" = 0 ]; then
	chown -R postgres: "$TMP"
	"$PGBOUNCER" -d -u postgres "$TMP/pgbouncer.ini" || bail "pgbouncer did not start"
else
	"$PGBOUNCER" -d "$TMP/pgbouncer.ini" || bail "pgbouncer did not start"
fi
for _ in $(seq 50); do
	[ -s "$TMP/pgbouncer.pid" ] && BOUNCER_PID=$(cat "$TMP/pgbouncer.pid") && break
	sleep 0.1
done
[ -n "$BOUNCER_PID" ] || bail "pgbouncer wrote no pid file"
for _ in $(seq 50); do
	psql -X -q -At -h 127.0.0.1 -p "$port" -c "SELECT 1" >/dev/null 2>&1 && break
	sleep 0.1
done
echo "# pgbouncer $("$PGBOUNCER" --version | head -1 | awk '{print $2}') (pid $BOUNCER_PID) on 127.0.0.1:$port, transaction pooling, 2 server connections"

# ---------------------------------------------------------------- the tests
BOUNCER_HOST=127.0.0.1 BOUNCER_PORT=$port "$PYTHON" - <<'PYTHON'
import json
import os
import select
import sys
import threading
import time

import psycopg2

BOUNCER = dict(host=os.environ["BOUNCER_HOST"], port=os.environ["BOUNCER_PORT"])
tag = str(os.getpid())
tests = failures = 0


def ok(cond, desc, *diag):
    global tests, failures
    tests += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", tests, desc))
    if not cond:
        failures += 1
        for d in diag:
            print("#   %s" % d)
    sys.stdout.flush()


def note(msg):
    print("# " + msg)
    sys.stdout.flush()


def direct():
    """A connection straight to the server (PG* variables)."""
    c = psycopg2.connect("")
    c.autocommit = True
    return c


def bounced(autocommit=True):
    """A connection through pgbouncer."""
    c = psycopg2.connect("", **BOUNCER)
    c.autocommit = autocommit
    return c


admin = direct()
acur = admin.cursor()
queues = []


def make_queue(name):
    q = "pgb_%s_%s" % (name, tag)
    acur.execute("SELECT queue.create(%s)", (q,))
    queues.append(q)
    return q


try:
    # ---------------------------------------------------------- (a)
    q = make_queue("a")
    result = {}

    def claimer():
        c = bounced()
        cur = c.cursor()
        t0 = time.monotonic()
        cur.execute("SELECT payload FROM queue.claim(%s, 1, wait => '5 s')", (q,))
        result["rows"] = cur.fetchall()
        result["t_return"] = time.monotonic()
        result["waited"] = result["t_return"] - t0
        c.close()

    producer = bounced()
    t = threading.Thread(target=claimer)
    t.start()
    time.sleep(0.3)
    producer.cursor().execute("SELECT queue.enqueue(%s, '{\"a\": 1}')", (q,))
    t_enqueued = time.monotonic()          # the enqueue has committed
    t.join(10)
    producer.close()
    rows = result.get("rows")
    latency = result["t_return"] - t_enqueued if "t_return" in result else None
    ok(rows == [({"a": 1},)], "(a) claim(wait => '5 s') through pgbouncer returns the job enqueued by another client",
       "rows: %r" % (rows,))
    ok(latency is not None and latency < 1.0 and result["waited"] >= 0.25,
       "(a) ... within 1 s of the enqueue's commit (%s ms after it, waited %s ms)"
       % ("%.0f" % max(0.0, latency * 1000) if latency is not None else "?",
          "%.0f" % (result.get("waited", 0) * 1000)))

    # ---------------------------------------------------------- (b)
    q = make_queue("b")
    NJOBS, NCLIENTS = 200, 8
    producer_done = threading.Event()
    completed = [[] for _ in range(NCLIENTS)]
    errors = []

    def client(k):
        try:
            c = bounced(autocommit=False)    # psycopg2 opens the transaction
            cur = c.cursor()
            while True:
                finished = producer_done.is_set()
                cur.execute("SELECT id, attempt FROM queue.claim(%s, 1, wait => '1 s')", (q,))
                row = cur.fetchone()
                if row is None:
                    c.commit()
                    if finished:
                        break       # nothing left after the last enqueue
                    continue
                cur.execute("SELECT queue.complete(%s)", (row[0],))
                c.commit()
                completed[k].append(row[0])
            c.close()
        except Exception as e:              # reported below
            errors.append("client %d: %s" % (k, e))

    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(NCLIENTS)]
    for t in threads:
        t.start()
    # The jobs arrive while the clients wait: 4 batches of 50, straight to
    # the server (through the pool an enqueue would queue behind claims
    # that hold both server connections while they wait).
    for b in range(4):
        time.sleep(0.2)
        acur.execute("SELECT count(*) FROM queue.enqueue_batch(%s, "
                     "(SELECT array_agg(jsonb_build_object('n', i)) FROM generate_series(%s, %s) i))",
                     (q, b * 50 + 1, b * 50 + 50))
    producer_done.set()
    t_enqueued = time.monotonic()
    for t in threads:
        t.join(30)
    elapsed = time.monotonic() - t0
    hung = sum(t.is_alive() for t in threads)
    ids = [i for c in completed for i in c]
    ok(not errors and not hung, "(b) %d clients on 2 server connections ran their claim(wait => '1 s') + complete loops to the end (%.1f s)"
       % (NCLIENTS, elapsed), *(errors + (["%d clients still running" % hung] if hung else [])))
    ok(len(ids) == NJOBS and len(set(ids)) == NJOBS,
       "(b) the clients completed %d jobs, none twice" % NJOBS,
       "completed %d, distinct %d" % (len(ids), len(set(ids))))
    acur.execute("SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE state = 'done' AND attempt = 1), "
                 "count(DISTINCT payload->>'n') FROM queue.archive WHERE queue = %s", (q,))
    arch = acur.fetchone()
    acur.execute("SELECT count(*) FROM queue.jobs WHERE queue = %s", (q,))
    left = acur.fetchone()[0]
    ok(arch == (NJOBS, NJOBS, NJOBS, NJOBS) and left == 0,
       "(b) queue.archive holds each of the %d jobs once, done at attempt 1; queue.jobs is empty" % NJOBS,
       "archive (rows, ids, done at attempt 1, payloads): %r, left in queue.jobs: %d" % (arch, left))
    acur.execute("SELECT id FROM queue.archive WHERE queue = %s", (q,))
    ok(sorted(r[0] for r in acur.fetchall()) == sorted(ids),
       "(b) the archived ids are the ids the clients completed")
    note("(b) per client: %s" % " ".join(str(len(c)) for c in completed))

    # ---------------------------------------------------------- (c)
    # Informational: LISTEN runs on whichever server connection the pool
    # lends for that one transaction; the notification goes to that server
    # connection, not to the client, which may never see it.
    q = make_queue("c")
    listener = bounced()
    listener.cursor().execute("LISTEN queue_" + q)
    others = [bounced() for _ in range(3)]
    for o in others:                        # keep the pool busy meanwhile
        o.cursor().execute("SELECT 1")
    acur.execute("SELECT queue.enqueue(%s, '{}')", (q,))
    deadline = time.monotonic() + 1.0
    got = []
    while not got and time.monotonic() < deadline:
        if select.select([listener], [], [], max(0, deadline - time.monotonic()))[0]:
            listener.poll()
            got = listener.notifies[:]
    note("(c) informational: a client that LISTENed through transaction pooling %s within 1 s"
         % ("received %d notification(s)" % len(got) if got else "received NO notification")
         + "; consumers behind a transaction pool should use claim(wait => ...) or LISTEN on a direct connection")
    for o in others:
        o.close()
    listener.close()
finally:
    for q in queues:
        try:
            acur.execute("SELECT queue.drop(%s, if_exists => true)", (q,))
        except Exception:
            pass
    admin.close()

print("1..%d" % tests)
if failures:
    print("# %d of %d failed" % (failures, tests))
    sys.exit(1)
print("# all %d passed" % tests)
PYTHON
rc=$?
# what pgbouncer did with the notification of (c)
grep -h "got packet 'A'" "$TMP/pgbouncer.log" 2>/dev/null | head -3 | sed 's/^.*\(WARNING\|LOG\) /# (c) pgbouncer log: /'
[ "$rc" -ne 0 ] && [ -f "$TMP/pgbouncer.log" ] && { echo "# pgbouncer log:"; tail -20 "$TMP/pgbouncer.log" | sed 's/^/#   /'; }
stop_bouncer
exit $rc
