#!/usr/bin/python3
"""bench/bench.py: the workloads of the queue benchmark suite.

Run by bench/run.sh (which builds, installs, starts the cluster and the PgQ
ticker, and installs the Node clients).  It connects through PGHOST, PGPORT,
PGUSER to database "bench", runs every workload for every system, and writes
raw.csv (every measurement), meta.json and timings.json into the output
directory; report.py then writes report.md and the charts from them.

    bench.py OUTDIR [--quick] [--only WORKLOAD,...]

See bench/README.md for what each workload measures.
"""
import csv
import json
import multiprocessing
import os
import queue as stdqueue
import random
import re
import select
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial

import psycopg2
import psycopg2.extensions

HERE = os.path.dirname(os.path.abspath(__file__))
PGBIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
PGBENCH = os.path.join(PGBIN, "pgbench")
NODE = os.path.join(HERE, "node", "node_modules", ".bin", "node")
NODE_SCRIPT = os.path.join(HERE, "node", "bench.mjs")
DB = "bench"
NPROC = os.cpu_count() or 2

LABEL = {
    "queue": "queue",
    "queue_noarch": "queue (no archive)",
    "baseline": "baseline",
    "pgq": "PgQ",
    "pgboss": "pg-boss",
    "graphile": "graphile-worker",
    "floor": "raw floor",
}
ALL_SYSTEMS = ["queue", "queue_noarch", "baseline", "pgq", "pgboss", "graphile", "floor"]


# ---------------------------------------------------------------- settings
class Cfg:
    def __init__(self, quick):
        self.quick = quick
        env = os.environ.get
        if quick:
            self.reps = int(env("BENCH_REPS", 1))
            self.main_clients = 4
            self.side_reps = 1
            self.enq_s = float(env("ENQ_SECONDS", 1))
            self.enq1_reps = int(env("BENCH_ENQ1_REPS", 1))
            self.enq1_s = float(env("ENQ1_SECONDS", 1))
            self.drain_s = float(env("DRAIN_SECONDS", 1))
            self.clients = [4]
            self.listen_clients = 4
            self.drain_clients = [4]
            self.drain_matrix = [(1, "tx"), (1, "leased"), (100, "leased"), (100, "batch"), (100, "batchkeep"),
                                 (100, "batchread"), (100, "keep")]
            self.steady_s = float(env("STEADY_SECONDS", 1))
            self.steady_rate = 100
            self.sched_n, self.sched_spread, self.sched_lead = 1000, 2, 1
            self.orphan_cap = 3.0
            self.horizon = [float(x) for x in env("HORIZON_PHASES", "1,2,1").split(",")]
            self.horizon_window = 1.0
            self.horizon_rate = 400
            self.groups = [None, 1, 1000]
            self.payloads = env("BENCH_PAYLOADS", "2048")
            # backlogs a third of a measured run's: filling them is most of
            # quick mode's time, and nothing is measured
            self.backlog_scale = 0.3
        else:
            self.reps = int(env("BENCH_REPS", 3))
            self.enq_s = float(env("ENQ_SECONDS", 4))
            # single-job enqueue is bound by the disk's flushes, whose rate
            # drifts: its targets (within 10% of a plain INSERT, with and
            # without listeners) are judged on longer runs, more of them:
            # one system's nine 16-client runs spread by up to 20%
            # (20261129T184715Z), which five could not settle to 10%.
            self.enq1_reps = int(env("BENCH_ENQ1_REPS", 9))
            self.enq1_s = float(env("ENQ1_SECONDS", 10))
            # the 4-client drains run `reps` times, the others `side_reps`
            self.main_clients = 4
            self.side_reps = int(env("BENCH_SIDE_REPS", 1))
            self.drain_s = float(env("DRAIN_SECONDS", 10))
            self.clients = [1, 4, 16]
            self.listen_clients = 16
            self.drain_clients = [1, 4, 16]
            self.drain_matrix = [(1, "tx"), (1, "leased"), (100, "tx"), (100, "leased"), (100, "batch"),
                                 (100, "batchkeep"), (100, "batchread"), (100, "read"), (100, "keep")]
            self.steady_s = float(env("STEADY_SECONDS", 20))
            self.steady_rate = 200
            self.sched_n, self.sched_spread, self.sched_lead = 10000, 20, 5
            self.orphan_cap = 80.0
            self.horizon = [float(x) for x in env("HORIZON_PHASES", "120,300,120").split(",")]
            self.horizon_window = 30.0
            self.horizon_rate = 800
            self.groups = [None, 1, 1000, 1000000]
            self.payloads = env("BENCH_PAYLOADS", "2048,65536")
            self.backlog_scale = 1.0
        self.payloads = [int(x) for x in self.payloads.split(",") if x]
        if not set(self.payloads) <= {2048, 65536}:
            sys.exit("BENCH_PAYLOADS: a comma list of 2048 and 65536")
        self.listeners = 4
        self.systems = [s for s in env("BENCH_SYSTEMS", ",".join(ALL_SYSTEMS)).split(",") if s]
        # the horizon takes 9 minutes per system and holder: a run may give
        # it fewer systems than the other workloads
        self.horizon_systems = [s for s in env("BENCH_HORIZON_SYSTEMS", ",".join(self.systems)).split(",") if s]


# ---------------------------------------------------------------- helpers
def log(*a):
    # one write per line: lanes log at once in quick mode
    sys.stderr.write(" ".join([time.strftime("%H:%M:%S")] + [str(x) for x in a]) + "\n")
    sys.stderr.flush()


def connect(autocommit=True, app="bench"):
    c = psycopg2.connect(dbname=DB, application_name=app)
    c.autocommit = autocommit
    return c


# Quick mode runs each system's cells in a lane (thread) of its own, all
# lanes at once (run_lanes); a full run measures one cell at a time.
PARALLEL = False
_local = threading.local()


def sql(q, args=None, fetch=None):
    """Run one statement on this thread's autocommit connection."""
    admin = getattr(_local, "admin", None)
    if admin is None or admin.closed:
        admin = _local.admin = connect(app="bench admin")
    with admin.cursor() as cur:
        cur.execute(q, args)
        if fetch == "one":
            return cur.fetchone()
        if fetch == "val":
            r = cur.fetchone()
            return r[0] if r else None
        if fetch == "all":
            return cur.fetchall()
    return None


def make_payload(nbytes=100, **extra):
    base = {"user_id": 12345, "email": "someone@example.com", "template": "welcome", "locale": "en-GB", "n": 1}
    base.update(extra)
    s = json.dumps(base)
    if len(s) < nbytes - 12:
        rnd = random.Random(nbytes)
        base["pad"] = "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(nbytes - len(s) - 10))
        s = json.dumps(base)
    return s


class PgbenchError(Exception):
    pass


def pgbench(script, clients, seconds, defs=None, rate=None, logprefix=None, extra=None):
    """Run one pgbench; returns dict(tx, tps, seconds, failed)."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False, dir="/tmp") as f:
        f.write(script)
        path = f.name
    os.chmod(path, 0o644)
    # the database goes last: pgbench's -d is --debug, four lines of output
    # per transaction
    cmd = [PGBENCH, "-n", "-M", "prepared", "-c", str(clients), "-j", str(min(clients, NPROC)),
           "-T", str(max(1, int(round(seconds)))), "-f", path]
    for k, v in (defs or {}).items():
        cmd += ["-D", "%s=%s" % (k, v)]
    if rate:
        cmd += ["-R", str(rate)]
    if logprefix:
        cmd += ["-l", "--log-prefix", logprefix]
    cmd += (extra or []) + [DB]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd="/tmp")
    os.unlink(path)
    out = p.stdout + p.stderr
    m_tps = re.search(r"^tps = ([0-9.]+) \(without initial connection time\)", out, re.M)
    m_tx = re.search(r"^number of transactions actually processed: (\d+)", out, re.M)
    m_fail = re.search(r"^number of failed transactions: (\d+)", out, re.M)
    if p.returncode != 0 or not m_tps or not m_tx or "aborted" in out:
        raise PgbenchError("pgbench failed (rc %d):\n%s\n--- script:\n%s" % (p.returncode, out[-3000:], script))
    tx, tps = int(m_tx.group(1)), float(m_tps.group(1))
    return {"tx": tx, "tps": tps, "seconds": tx / tps if tps > 0 else seconds,
            "failed": int(m_fail.group(1)) if m_fail else 0}


def node(args, timeout=900):
    env = dict(os.environ, PGDATABASE=DB)
    p = subprocess.run([NODE, NODE_SCRIPT, json.dumps(args)], capture_output=True, text=True,
                       cwd=os.path.join(HERE, "node"), env=env, timeout=timeout)
    lines = [l for l in p.stdout.strip().splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        raise RuntimeError("node %s failed (rc %d):\n%s\n%s" % (args, p.returncode, p.stdout[-2000:], p.stderr[-3000:]))
    return json.loads(lines[-1])


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    i = min(len(s) - 1, max(0, int(-(-p * len(s) // 100)) - 1))
    return s[i]


class WalMeter:
    """WAL written and flushed, and the server's CPU time, across the cluster
    while a run lasts, per job.  Bytes come from the insert position, so they
    are exact; flushes (pg_stat_wal.wal_sync) from the statistics, which
    backends report when they go idle or exit, so this session forces its own
    report first.  CPU time is every server process's user + system time from
    /proc (the cluster runs on this machine): it moves far less with the
    VM's noise than throughput does, so it is how systems compare on work
    done rather than on luck."""

    def __init__(self):
        self.start = self._now()

    @staticmethod
    def _now():
        sql("SELECT pg_stat_force_next_flush()")
        sql("SELECT pg_stat_clear_snapshot()")
        lsn, flushes, pid = sql("SELECT pg_current_wal_insert_lsn() - '0/0', wal_sync, pg_backend_pid() FROM pg_stat_wal",
                                fetch="one")
        return lsn, flushes, server_cpu(pid)

    def record(self, res, workload, variant, system, clients, rep, jobs):
        if jobs <= 0:
            return
        time.sleep(0.3)  # pgbench's backends report their statistics as they exit
        end = self._now()
        v = "%s: %s" % (workload, variant)
        res.add("wal", v, system, clients, rep, "WAL per job", round(float(end[0] - self.start[0]) / jobs, 1), "bytes")
        res.add("wal", v, system, clients, rep, "WAL flushes per job", round(float(end[1] - self.start[1]) / jobs, 3), "flushes")
        if end[2] is not None and self.start[2] is not None:
            res.add("wal", v, system, clients, rep, "server CPU per job",
                    round((end[2] - self.start[2]) * 1e6 / jobs, 2), "µs")


def proc_stat(pid):
    """The fields of /proc/<pid>/stat after the command name (so field 1 is
    the parent's pid, 11 and 12 user and system time in clock ticks)."""
    with open("/proc/%s/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()


def server_cpu(backend_pid):
    """Seconds of CPU the cluster's processes have used: the postmaster's
    own and its exited children's (which it has reaped), and its live
    children's.  None where /proc does not show the server."""
    try:
        postmaster = int(proc_stat(backend_pid)[1])
        f = proc_stat(postmaster)
        ticks = sum(int(x) for x in f[11:15])  # utime, stime, cutime, cstime
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == postmaster:
                continue
            try:
                f = proc_stat(pid)
            except OSError:
                continue  # exited meanwhile: counted in the postmaster's cutime
            if int(f[1]) == postmaster:
                ticks += int(f[11]) + int(f[12])
    except (OSError, ValueError, IndexError):
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


# the tables autovacuum would pick now, by its default thresholds
DUE_FOR_VACUUM = """
SELECT format('%I.%I', schemaname, relname) FROM pg_stat_user_tables
 WHERE n_dead_tup > 50 + 0.2 * n_live_tup
    OR n_ins_since_vacuum > 1000 + 0.2 * n_live_tup
 ORDER BY 1"""


def quiesce():
    """Before a measured run: VACUUM ANALYZE what autovacuum would pick, then
    CHECKPOINT. Left to autovacuum, the cleanup after earlier runs (throttled,
    10-20 s per table on this VM) landed in whichever system's run came next.
    Quick mode measures nothing, and its lanes drop tables this would name."""
    if PARALLEL:
        return
    for (t,) in sql(DUE_FOR_VACUUM, fetch="all"):
        sql("VACUUM ANALYZE %s" % t)
    sql("CHECKPOINT")


# ---------------------------------------------------------------- results
class Results:
    FIELDS = ["workload", "variant", "system", "clients", "rep", "metric", "value", "unit", "note"]

    def __init__(self, path):
        self.path = path
        self.rows = []
        self.f = open(path, "w", newline="")
        self.w = csv.DictWriter(self.f, fieldnames=self.FIELDS)
        self.w.writeheader()
        self.failures = []
        self.warnings = []
        self.lock = threading.Lock()

    def add(self, workload, variant, system, clients, rep, metric, value, unit, note=""):
        row = dict(workload=workload, variant=variant, system=system, clients=clients, rep=rep,
                   metric=metric, value=value, unit=unit, note=note)
        with self.lock:
            self.rows.append(row)
            self.w.writerow(row)
            self.f.flush()

    def warn(self, what, msg):
        log("WARNING:", what, msg)
        with self.lock:
            self.warnings.append((what, msg))

    def fail(self, what, err):
        log("FAILED:", what, str(err)[:2000])
        with self.lock:
            self.failures.append((what, str(err)))


# ---------------------------------------------------------------- setup
BASE_DDL = """
CREATE TABLE IF NOT EXISTS {t} (
    id           bigserial PRIMARY KEY,
    payload      jsonb NOT NULL,
    run_at       timestamptz NOT NULL DEFAULT now(),
    locked_until timestamptz,
    attempts     int NOT NULL DEFAULT 0,
    enqueued_at  timestamptz NOT NULL DEFAULT now()
);
-- the claim order of ready jobs: a careful user's partial index
CREATE INDEX IF NOT EXISTS {t}_ready ON {t} (run_at, id) WHERE locked_until IS NULL;
-- the reaper's index: expired leases
CREATE INDEX IF NOT EXISTS {t}_locked ON {t} (locked_until) WHERE locked_until IS NOT NULL;
"""


def base_claim(t, n, lease="30 seconds"):
    return ("UPDATE {t} SET locked_until = now() + interval '{lease}', attempts = attempts + 1 "
            "WHERE id IN (SELECT id FROM {t} WHERE locked_until IS NULL AND run_at <= now() "
            "ORDER BY run_at, id FOR UPDATE SKIP LOCKED LIMIT {n}) "
            "RETURNING id, payload, attempts").format(t=t, n=n, lease=lease)


def setup_db():
    sql("CREATE EXTENSION IF NOT EXISTS queue")
    sql("CREATE EXTENSION IF NOT EXISTS pgq")
    for t in ["base_jobs", "base_lat", "base_orph", "base_sched"]:
        sql(BASE_DDL.format(t=t))
    # the queues the enqueue and drain workloads share (BENCH_ONLY=drain has no enqueue run)
    sql("SELECT queue.create('bq', if_not_exists => true)")
    sql("SELECT queue.create('bq0', retention => '0', if_not_exists => true)")
    # the raw floor: plain row operations on a table with a primary key only
    sql("CREATE TABLE IF NOT EXISTS floor_ins (id bigserial PRIMARY KEY, payload jsonb NOT NULL)")
    # stored as queue stores its jobs (rows of up to a page kept whole, lz4
    # where the server has it), so that no floor pays for TOAST queue avoids
    sql("CREATE TABLE IF NOT EXISTS floor_jobs (id bigint PRIMARY KEY, payload jsonb NOT NULL, locked_until timestamptz)"
        " WITH (toast_tuple_target = 8160)")
    # ... and with one lease per batch: a row per claim naming its id range
    sql("CREATE TABLE IF NOT EXISTS floor_leases (lo bigint PRIMARY KEY, hi bigint NOT NULL, lease_until timestamptz NOT NULL)")
    # ... and keeping every finished job, as queue's archive does: a table
    # with a btree on id (what queue.history() looks jobs up by)
    sql("CREATE TABLE IF NOT EXISTS floor_archive (id bigint NOT NULL, payload jsonb NOT NULL, finished_at timestamptz NOT NULL)"
        " WITH (toast_tuple_target = 8160)")
    sql("CREATE INDEX IF NOT EXISTS floor_archive_id ON floor_archive (id)")
    if sql("SELECT 'lz4' = ANY (enumvals) FROM pg_settings WHERE name = 'default_toast_compression'", fetch="val"):
        sql("ALTER TABLE floor_jobs ALTER payload SET COMPRESSION lz4")
        sql("ALTER TABLE floor_archive ALTER payload SET COMPRESSION lz4")
    # PgQ: one queue for enqueue; pq_0..pq_15 (one consumer each) for drains
    for q in ["pq"] + ["pq_%d" % i for i in range(16)]:
        pgq_recreate(q, max_count=100 if q != "pq" else None)
    sql("""
CREATE OR REPLACE PROCEDURE pq_fill(q text, n int, p text) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. (n + 99) / 100 LOOP
        PERFORM pgq.insert_event(q, 'job', p) FROM generate_series(1, 100);
        COMMIT;
        PERFORM pgq.ticker(q);
        COMMIT;
    END LOOP;
END $$""")
    node({"cmd": "setup"})


def pgq_recreate(q, max_count=None):
    sql("SELECT pgq.unregister_consumer(%s, 'c') FROM pgq.queue WHERE queue_name = %s", (q, q))
    sql("SELECT pgq.drop_queue(%s) FROM pgq.queue WHERE queue_name = %s", (q, q))
    sql("SELECT pgq.create_queue(%s)", (q,))
    if max_count:
        sql("SELECT pgq.set_queue_config(%s, 'ticker_max_count', %s)", (q, str(max_count)))
    sql("SELECT pgq.register_consumer(%s, 'c')", (q,))


def pgq_ticked(q, n, payload):
    """A fresh PgQ queue with n events in one tick, for consumer 'c'."""
    pgq_recreate(q)
    sql("SELECT count(pgq.insert_event(%%s, 'job', %%s)) FROM generate_series(1, %d)" % n, (q, payload))
    sql("SELECT pgq.force_tick(%s)", (q,))
    sql("SELECT pgq.ticker(%s)", (q,))


def pgq_take(cur, q):
    """(batch id, events in it) of consumer 'c''s next batch of queue q."""
    cur.execute("SELECT pgq.next_batch(%s, 'c')", (q,))
    bid = cur.fetchone()[0]
    if bid is None:
        return None, 0
    cur.execute("SELECT count(*) FROM pgq.get_batch_events(%s)", (bid,))
    return bid, cur.fetchone()[0]


def queue_recreate(name, **opts):
    sql("SELECT queue.drop(%s, if_exists => true)", (name,))
    o = "".join(", %s => %%s" % k for k in opts)
    sql("SELECT queue.create(%%s%s)" % o, (name,) + tuple(opts.values()))


QNAME = {"queue": "bq", "queue_noarch": "bq0"}


def reset(system):
    """Fresh, empty state for an enqueue run."""
    if system in QNAME:
        queue_recreate(QNAME[system], **({"retention": "0"} if system == "queue_noarch" else {}))
    elif system == "baseline":
        sql("TRUNCATE base_jobs RESTART IDENTITY")
    elif system == "floor":
        sql("TRUNCATE floor_ins RESTART IDENTITY")
        sql("TRUNCATE floor_jobs")
    elif system == "pgq":
        pgq_recreate("pq")
    else:
        node({"cmd": "reset", "system": system})
    quiesce()


# ---------------------------------------------------------------- enqueue
# what a session LISTENs on to hear of a system's new jobs (the floor's
# channel is never notified: its listeners only sit there)
CHANNEL = {"queue": "queue_bq", "queue_noarch": "queue_bq0", "baseline": "base_jobs", "floor": "floor_ins"}


def enqueue_script(system, batch, listened=False, returning=False):
    if system == "baseline" and listened:
        # a hand-written queue wakes its consumers itself, in the same transaction
        return ("WITH j AS (INSERT INTO base_jobs (payload) VALUES (:p::jsonb) RETURNING id) "
                "SELECT pg_notify('base_jobs', '') FROM j;\n")
    if system in QNAME:
        q = QNAME[system]
        if batch == 1:
            return "SELECT queue.enqueue('%s', :p::jsonb);\n" % q
        return "SELECT count(*) FROM queue.enqueue_batch('%s', :arr::jsonb[]);\n" % q
    if system == "baseline":
        if batch == 1:
            return "INSERT INTO base_jobs (payload) VALUES (:p::jsonb);\n"
        return "INSERT INTO base_jobs (payload) SELECT unnest(:arr::jsonb[]);\n"
    if system == "floor":
        if batch == 1:
            return "INSERT INTO floor_ins (payload) VALUES (:p::jsonb)%s;\n" % (" RETURNING id" if returning else "")
        return "INSERT INTO floor_ins (payload) SELECT unnest(:arr::jsonb[]);\n"
    if system == "pgq":
        if batch == 1:
            return "SELECT pgq.insert_event('pq', 'job', :p::text);\n"
        return "SELECT count(pgq.insert_event('pq', 'job', e)) FROM unnest(:arr::text[]) e;\n"
    raise ValueError(system)


def pg_array(items):
    return "{" + ",".join('"' + i.replace("\\", "\\\\").replace('"', '\\"') + '"' for i in items) + "}"


def listener(channel, ready, stop, out):
    """One session LISTENing on channel that reads every notification as it
    comes, as a waiting consumer would, in a process of its own; puts the
    number it read and the CPU seconds it spent meanwhile."""
    c = connect(app="bench listener")
    c.cursor().execute("LISTEN %s" % channel)
    ready.release()
    n = 0
    cpu0 = time.process_time()
    while not stop.is_set():
        if select.select([c], [], [], 0.2)[0]:
            c.poll()
            n += len(c.notifies)
            del c.notifies[:]
    cpu = time.process_time() - cpu0
    c.close()
    out.put((n, cpu))


def run_enqueue(cfg, res, system, clients, batch, seconds, nbytes=100, workload="enqueue", variant=None, rep=0,
                listeners=0, returning=False):
    """returning (the raw floor's single jobs only): the INSERT hands the
    new row's id back to the client, as queue.enqueue() does."""
    reset(system)
    p = make_payload(nbytes)
    variant = variant or ("1 job/txn" if batch == 1 else "%d jobs/txn" % batch)
    if returning:
        variant += ", id returned"
    if listeners:
        variant += ", %d listeners" % listeners
        mp = multiprocessing.get_context("forkserver" if PARALLEL else "fork")
        ready, stop, out = mp.Semaphore(0), mp.Event(), mp.Queue()
        procs = [mp.Process(target=listener, args=(CHANNEL[system], ready, stop, out)) for _ in range(listeners)]
        for pr in procs:
            pr.start()
        for _ in procs:
            ready.acquire(timeout=30)
        try:
            wal = WalMeter()
            r = pgbench(enqueue_script(system, batch, True), clients, seconds, {"p": p})
            wal.record(res, workload, variant, system, clients, rep, r["tx"])
        finally:
            stop.set()
            heard = []
            for pr in procs:
                try:
                    heard.append(out.get(timeout=30))
                except stdqueue.Empty:
                    pass
                pr.join(timeout=15)
        res.add(workload, variant, system, clients, rep, "throughput", round(r["tps"], 1), "jobs/s")
        if heard and system != "floor":
            res.add(workload, variant, system, clients, rep, "jobs per notification read",
                    round(r["tx"] / max(1, statistics.median(n for n, _ in heard)), 1), "jobs")
        if len(heard) == len(procs):
            # what reading the notifications cost the listening clients (their
            # backends' share is in the server's CPU per job)
            res.add(workload, variant, system, clients, rep, "listening clients' CPU per job",
                    round(sum(cpu for _, cpu in heard) * 1e6 / max(1, r["tx"]), 2), "µs")
        return r["tps"]
    if system in ("pgboss", "graphile"):
        r = node({"cmd": "enqueue", "system": system, "clients": clients, "seconds": seconds,
                  "batch": batch, "bytes": nbytes})
        rate = r["rate"]
    else:
        defs = {"p": p} if batch == 1 else {"arr": pg_array([p] * batch)}
        wal = WalMeter()
        r = pgbench(enqueue_script(system, batch, returning=returning), clients, seconds, defs)
        rate = r["tps"] * batch
        wal.record(res, workload, variant, system, clients, rep, r["tx"] * batch)
    res.add(workload, variant, system, clients, rep, "throughput", round(rate, 1), "jobs/s")
    return rate


BULK_CALLS = 5


def run_bulk(cfg, res, system, n, rep):
    """One call enqueueing n jobs into an empty queue. A call lasts ~150 ms,
    which this VM's noise moves by a third (110-172 ms for the same system
    within one minute), so each repetition times BULK_CALLS calls (quick
    mode: one), each into a freshly emptied queue, and keeps their median;
    the WAL and CPU figures are those of the last call."""
    p = make_payload(100)
    durations = []
    calls = 1 if cfg.quick else BULK_CALLS
    for call in range(calls):
        reset(system)
        last = call == calls - 1
        if system in ("pgboss", "graphile"):
            durations.append(node({"cmd": "bulk", "system": system, "n": n})["seconds"])
            continue
        c = connect()
        cur = c.cursor()
        arr = [p] * n
        stmt = {
            "queue": "SELECT count(*) FROM queue.enqueue_batch('bq', %s::jsonb[])",
            "queue_noarch": "SELECT count(*) FROM queue.enqueue_batch('bq0', %s::jsonb[])",
            "baseline": "INSERT INTO base_jobs (payload) SELECT unnest(%s::jsonb[])",
            "floor": "INSERT INTO floor_ins (payload) SELECT unnest(%s::jsonb[])",
            "pgq": "SELECT count(pgq.insert_event('pq', 'job', e)) FROM unnest(%s::text[]) e",
        }[system]
        # the first call on a backend loads caches and plans: not timed
        cur.execute("BEGIN")
        cur.execute(stmt, ([p],))
        cur.execute("ROLLBACK")
        wal = WalMeter() if last else None
        t0 = time.time()
        cur.execute(stmt, (arr,))
        durations.append(time.time() - t0)
        c.close()
        if wal:
            wal.record(res, "bulk", "one call, %d jobs" % n, system, 1, rep, n)
    secs = statistics.median(durations)
    res.add("bulk", "one call, %d jobs" % n, system, 1, rep, "duration", round(secs * 1000, 1), "ms")
    res.add("bulk", "one call, %d jobs" % n, system, 1, rep, "throughput", round(n / secs, 1), "jobs/s")


# ---------------------------------------------------------------- drain
def drains(system, batch, mode):
    """Whether system has a drain of this batch size and mode."""
    if system == "pgq" and batch == 1:
        return False  # PgQ hands out batches per tick only
    if system == "graphile" and mode == "tx":
        return False  # graphile-worker completes after the task, in its own transaction
    return mode not in FLOOR_MODES or (system == "floor" and batch > 1)


# the raw floor's drains of batches that no system runs: what the least work
# of a kind costs, to explain the cells a peer wins
FLOOR_MODES = {
    "batch": "leased, one lease per batch",
    "batchkeep": "leased, one lease per batch, archived",
    "batchread": "leased, one lease per batch, payloads read, archived",
    "read": "one txn, payloads read",
    "keep": "one txn, payloads read, archived",
}


# drains of 100 that run as often with 1 and 16 consumers as with 4: those
# #4's drain targets are judged on (a single 10 s run of the one-consumer
# baseline ranged 32,759-39,290 jobs/s), and those PgQ's leased batches are
# (with 16 consumers PgQ ran 264,098 and 328,645 jobs/s in single runs of two
# days, 20261129T201036Z and 20261129T231317Z)
JUDGED_CELLS = {("queue", "tx"), ("queue", "leased"), ("baseline", "tx"), ("baseline", "leased"),
                ("pgq", "leased"), ("queue_noarch", "leased"), ("floor", "batchkeep"), ("floor", "batchread")}


def drain_script(system, batch, mode):
    """mode: "tx" (claim and complete in one transaction), "leased" (two), or,
    for the raw floor only, one of FLOOR_MODES.
    Every consumer receives the payloads it claims, as pg-boss's and
    graphile-worker's do: pgbench keeps them in a variable."""
    tx = mode == "tx"
    B, C = ("BEGIN;\n", "COMMIT;\n") if tx else ("", "")
    if system in QNAME:
        q = QNAME[system]
        if batch == 1:
            claim = ("SELECT coalesce(max(id), 0) AS id, max(attempt) AS att, max(payload::text) AS payload "
                     "FROM queue.claim('%s', 1) \\gset\n" % q)
            done = ("\\if :id > 0\nSELECT queue.complete(:id::bigint%s);\n\\endif\n"
                    % ("" if tx else ", attempt => :att::int"))
            return B + claim + done + C
        claim = ("SELECT coalesce(array_agg(id), '{}') AS ids, string_agg(payload::text, ',') AS payloads "
                 "FROM queue.claim('%s', %d) \\gset\n" % (q, batch))
        return B + claim + "SELECT queue.complete(:ids::bigint[]);\n" + C
    if system == "baseline":
        claim = ("WITH c AS (%s) SELECT coalesce(array_agg(id), '{}') AS ids, string_agg(payload::text, ',') AS payloads "
                 "FROM c \\gset\n" % base_claim("base_jobs", batch))
        if batch == 1:
            claim = claim.replace("coalesce(array_agg(id), '{}') AS ids", "coalesce(max(id), 0) AS id")
            return B + claim + "\\if :id > 0\nDELETE FROM base_jobs WHERE id = :id::bigint;\n\\endif\n" + C
        return B + claim + "DELETE FROM base_jobs WHERE id = ANY (:ids::bigint[]);\n" + C
    if system == "floor":
        # the same row operations as the baseline (one UPDATE + one DELETE per
        # job), on rows each client owns: no search, no locks to skip.  Leased,
        # each is a transaction of its own: the least a queue that writes each
        # job's lease can do.  "batch" writes one lease row per claim instead,
        # and deletes it with the jobs: the least a queue with a lease per
        # batch (PgQ's unit of work) can do.  "batchkeep" moves the jobs into
        # an archive instead of deleting them: what a queue that keeps its
        # finished jobs in a table of their own does, in plain SQL, and
        # "batchread" reads the payloads in the claiming transaction as well:
        # all that queue's leased claims of 100 do but the search.  "read"
        # hands the payloads to the consumer and deletes the jobs, in one
        # statement, and "keep" archives them too: the least a queue can do
        # per job in one transaction, reading what it claims.
        ids = "\\set lo :client_id * 1000000000 + :n * %d + 1\n\\set hi :lo + %d\n\\set n :n + 1\n" % (batch, batch - 1)
        take = "DELETE FROM floor_jobs WHERE id BETWEEN :lo AND :hi"
        keep = "INSERT INTO floor_archive SELECT id, payload, now() FROM d"
        if mode in ("batch", "batchkeep", "batchread"):
            done = take + ";\n" if mode == "batch" else "WITH d AS (%s RETURNING id, payload) %s;\n" % (take, keep)
            lease = "INSERT INTO floor_leases VALUES (:lo, :hi, now() + interval '30 seconds')"
            if mode == "batchread":
                lease = ("WITH l AS (%s) SELECT string_agg(payload::text, ',') AS payloads FROM floor_jobs "
                         "WHERE id BETWEEN :lo AND :hi \\gset" % lease)
            else:
                lease += ";"
            return ids + lease + "\nBEGIN;\n" + done + "DELETE FROM floor_leases WHERE lo = :lo;\nCOMMIT;\n"
        if mode in ("read", "keep"):
            return (ids + "WITH d AS (%s RETURNING id, payload)%s SELECT string_agg(payload::text, ',') AS payloads "
                    "FROM d \\gset\n" % (take, ", a AS (%s)" % keep if mode == "keep" else ""))
        return (ids
                + B
                + "UPDATE floor_jobs SET locked_until = now() + interval '30 seconds' WHERE id BETWEEN :lo AND :hi;\n"
                + "DELETE FROM floor_jobs WHERE id BETWEEN :lo AND :hi;\n" + C)
    if system == "pgq":
        # one queue (and consumer) per client: PgQ has no competing consumers
        return (B + "SELECT coalesce(pgq.next_batch('pq_' || :client_id, 'c'), 0) AS bid \\gset\n"
                + "\\if :bid > 0\n"
                + "SELECT ev_id, ev_data FROM pgq.get_batch_events(:bid::bigint);\n"
                + "SELECT pgq.finish_batch(:bid::bigint);\n\\endif\n" + C)
    raise ValueError(system)


def backlog(system, clients=None):
    if system in QNAME:
        return sql("SELECT (SELECT count(*) FROM queue.q_%s WHERE state = 'ready')"
                   " - (SELECT coalesce(sum(cardinality(ids)), 0) FROM queue.l_%s)" % (QNAME[system], QNAME[system]),
                   fetch="val")
    if system == "baseline":
        return sql("SELECT count(*) FROM base_jobs WHERE locked_until IS NULL", fetch="val")
    if system == "pgq":
        return int(sql("SELECT coalesce(sum(pending_events), 0) FROM pgq.get_consumer_info() "
                       "WHERE queue_name ~ '^pq_[0-9]+$' AND consumer_name = 'c' "
                       "AND substr(queue_name, 4)::int < %s", (clients,), fetch="val"))
    if system == "floor":
        return sql("SELECT count(*) FROM floor_jobs", fetch="val")
    raise ValueError(system)


# the payload of the events in each PgQ drain queue (pq_<client>)
PGQ_PAYLOAD = {}


def top_up(system, target, clients, p, batch=1):
    """Bring the ready backlog to `target` jobs; returns the backlog."""
    if system == "floor":
        # every client gets its own id range, filled afresh
        sql("TRUNCATE floor_jobs, floor_leases, floor_archive")
        per = int(target / clients) + batch
        for c in range(clients):
            sql("INSERT INTO floor_jobs (id, payload) SELECT %s::bigint * 1000000000 + i, %s::jsonb FROM generate_series(1, %s) i",
                (c, p, per))
    elif system == "pgq":
        per = int(target / clients) + 1
        for c in range(clients):
            q = "pq_%d" % c
            # events left by a run with another payload would be read first
            if PGQ_PAYLOAD.get(q, p) != p:
                pgq_recreate(q, max_count=100)
            PGQ_PAYLOAD[q] = p
            have = int(sql("SELECT coalesce(sum(pending_events), 0) FROM pgq.get_consumer_info(%s, 'c')", (q,), fetch="val"))
            if have < per:
                sql("CALL pq_fill(%s, %s, %s)", (q, per - have, p))
    else:
        have = backlog(system)
        need = target - have
        chunk = max(100, min(20000, 32 * 1048576 // len(p)))
        while need > 0:
            k = min(need, chunk)
            if system in QNAME:
                sql("SELECT count(*) FROM queue.enqueue_batch(%%s, (SELECT array_agg(%%s::jsonb) FROM generate_series(1, %d)))" % k,
                    (QNAME[system], p))
            else:
                sql("INSERT INTO base_jobs (payload) SELECT %%s::jsonb FROM generate_series(1, %d)" % k, (p,))
            need -= k
    vacuum(system)
    quiesce()
    return backlog(system, clients)


# a drain's backlog larger than this is dropped once it is measured
KEEP_BACKLOG_BYTES = 1 << 30


def discard_backlog(system, clients):
    """Drop what is left of a drain's backlog.  Left in place until the
    system's next run, the 64 KB backlogs of every system added up: PgQ's
    four queues alone held 24 GB when a run was stopped at 31 GB free.
    Smaller ones stay, for the next repetition to top up."""
    if system == "pgq":
        for c in range(clients):
            pgq_recreate("pq_%d" % c, max_count=100)
            PGQ_PAYLOAD.pop("pq_%d" % c, None)
    elif system == "floor":
        sql("TRUNCATE floor_jobs, floor_leases, floor_archive")
    else:
        reset(system)


def vacuum(system):
    tables = {"queue": ["queue.q_bq"], "queue_noarch": ["queue.q_bq0"], "baseline": ["base_jobs"],
              "floor": ["floor_jobs", "floor_leases"], "pgq": []}.get(system, [])
    for t in tables:
        sql("VACUUM ANALYZE %s" % t)


# a first guess of drain rates (jobs/s) to size backlogs; refined by measurement
def guess(batch, nbytes):
    if nbytes >= 65536:
        return 800 if batch == 1 else 2500
    if nbytes >= 2048:
        return 4000 if batch == 1 else 25000
    return 6000 if batch == 1 else 60000


def ran_dry(system, clients):
    """Whether some consumer found nothing left at the end of a run."""
    if system == "floor":
        return sql("SELECT count(DISTINCT id / 1000000000) FROM floor_jobs", fetch="val") < clients
    if system == "pgq":
        return sql("SELECT count(*) FROM pgq.get_consumer_info() WHERE queue_name ~ '^pq_[0-9]+$' "
                   "AND consumer_name = 'c' AND substr(queue_name, 4)::int < %s AND pending_events > 0",
                   (clients,), fetch="val") < clients
    return backlog(system, clients) == 0


def estimate(rates, system, batch, mode, nbytes, clients):
    """A drain rate to size the backlog from: this configuration's last run,
    or the fastest similar one, generously."""
    key = (system, batch, mode, nbytes, clients)
    if key in rates:
        return rates[key] * 1.5
    if mode in FLOOR_MODES:
        # a lease per batch skips an UPDATE per job: up to twice as fast
        return estimate(rates, system, batch, "leased" if mode.startswith("batch") else "tx", nbytes, clients) * 2
    similar = [r for k, r in rates.items() if k[:4] == (system, batch, mode, nbytes)]
    if similar:
        return max(similar) * 2.5
    same_sys = [r for k, r in rates.items() if k[:3] == (system, batch, mode) and k[3] == 100]
    factor = {100: 1, 2048: 0.5, 65536: 0.03}.get(nbytes, 1)
    if same_sys:
        return max(same_sys) * factor * 2.5
    # the Node clients drained at a third to a half of queue's rates in
    # 20261122T173930Z, and fill their backlogs slowest of all
    return guess(batch, nbytes) * {"floor": 2, "pgq": 2, "pgboss": 0.5, "graphile": 0.5}.get(system, 1) * 2


def run_drain(cfg, res, system, clients, batch, mode, seconds, rates, nbytes=100, workload="drain", variant=None, rep=0):
    key = (system, batch, mode, nbytes, clients)
    p = make_payload(nbytes)
    variant = variant or "claim %d + complete, %s" % (batch, dict(FLOOR_MODES, tx="one txn", leased="leased (two txns)")[mode])
    est = estimate(rates, system, batch, mode, nbytes, clients)
    # never preload more payload than run.sh allows (BENCH_MAX_BACKLOG_MB, or
    # sized by the free disk)
    cap_mb = os.environ.get("BENCH_BACKLOG_MB", 3072)
    cap = int(float(cap_mb) * 1048576 / max(nbytes, 100))
    # the Node clients fill their backlog inside the run: of theirs, only the
    # WAL written while the consumers ran is measured (by the Node side)
    wal = node_wal = None
    for attempt in (1, 2):
        want = int(est * seconds * cfg.backlog_scale) + 5 * batch * clients
        target = min(want, cap)
        # A backlog the cap cuts short runs for less time, so that it still
        # outlasts the run: a rate, not the cap's lower bound (at 64 KB every
        # peer drained the capped backlog within 10 s and showed the same
        # "rate", the cap over the duration, in 20261129T090322Z).
        secs = seconds if want <= cap else max(2.0, seconds * target / want)
        if system in ("pgboss", "graphile"):
            quiesce()
            r = node({"cmd": "drain", "system": system, "clients": clients, "seconds": secs, "batch": batch,
                      "mode": mode, "target": target, "bytes": nbytes})
            rate, jobs, dry = r["rate"], r["jobs"], r["jobs"] >= r.get("backlog", target)
            node_wal = r.get("wal")
        else:
            before = top_up(system, target, clients, p, batch)
            wal = WalMeter()
            r = pgbench(drain_script(system, batch, mode), clients, secs, {"n": 0})
            after = backlog(system, clients)
            jobs = before - after
            rate = jobs / r["seconds"]
            dry = ran_dry(system, clients)
        if not dry:
            if secs < seconds:
                res.warn("drain %s %s c%d" % (system, variant, clients),
                         "ran %d s, not %g: the backlog cap (%s MB) cuts its backlog" % (round(secs), seconds, cap_mb))
            if wal is not None:
                wal.record(res, workload, variant, system, clients, rep, jobs)
            elif node_wal is not None and jobs > 0:
                res.add("wal", "%s: %s" % (workload, variant), system, clients, rep, "WAL per job",
                        round(float(node_wal) / jobs, 1), "bytes")
            break
        if cfg.quick:
            log("backlog ran dry (%s, %s, %d clients): quick mode keeps the lower bound" % (system, variant, clients))
            break
        if attempt == 1:  # a larger estimate: a larger backlog, or a shorter run
            log("backlog ran dry (%s, %s, %d clients): again, sized for a faster drain" % (system, variant, clients))
            est = max(est, rate) * 3
            continue
        res.warn("drain %s %s c%d" % (system, variant, clients), "backlog ran out: the rate is a lower bound")
        break
    rates[key] = max(rate, 1.0)
    res.add(workload, variant, system, clients, rep, "throughput", round(rate, 1), "jobs/s")
    if target * len(p) > KEEP_BACKLOG_BYTES:
        discard_backlog(system, clients)
    return rate


def backend_cpu(pid):
    """Seconds of CPU one server process has used, or None."""
    try:
        fields = proc_stat(pid)
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def run_output(cfg, res, nbytes, rep=0):
    """What handing a payload to its consumer costs the server, by the type
    it is stored as.  Every consumer here receives payloads as text: a jsonb
    value (queue's, the baseline's, pg-boss's) is converted by jsonb_out,
    which walks the value and escapes every string in it; a json value
    (graphile-worker's) or text (PgQ's) is sent as stored.  One backend
    writes the same rows of each type to /dev/null with COPY (output
    functions, no network), in turns; its CPU time per payload is the
    figure (summed over the turns: /proc counts in ticks of 10 ms)."""
    label = {100: "100 B", 2048: "2 KB", 65536: "64 KB"}[nbytes]
    p = make_payload(nbytes)
    n = max(1000, min(200000, (64 << 20) // nbytes))
    sql("DROP TABLE IF EXISTS bench_output")
    sql("CREATE UNLOGGED TABLE bench_output AS SELECT %s::jsonb AS jb, %s::json AS js FROM generate_series(1, %s)",
        (p, p, n))
    sql("VACUUM ANALYZE bench_output")
    pid = sql("SELECT pg_backend_pid()", fetch="val")
    spent = {"jsonb": [], "json": []}
    reps = 3 if cfg.quick else 5
    for _ in range(reps):
        for typ, col in (("jsonb", "jb"), ("json", "js")):
            t0, c0 = time.time(), backend_cpu(pid)
            sql("COPY (SELECT %s FROM bench_output) TO '/dev/null'" % col)
            c1 = backend_cpu(pid)
            # the clock where /proc does not show the server
            spent[typ].append((c1 - c0) if c0 is not None and c1 is not None else time.time() - t0)
    sql("DROP TABLE bench_output")
    for typ, v in spent.items():
        res.add("payload output", "%s, %s" % (label, typ), "server", 1, rep, "CPU per payload",
                round(sum(v) * 1e6 / (reps * n), 2), "µs")


# ---------------------------------------------------------------- steady state latency
def producer_loop(conn, stmt, make, rate, seconds, random_arrivals=False):
    """Send int(rate * seconds) jobs at rate, one per transaction: evenly
    spaced, or at random times (a Poisson stream, the same one every run)
    whose gaps are as often shorter than a wake-up's spacing as real traffic
    makes them.  Returns {job id: time the commit was acknowledged}."""
    cur = conn.cursor()
    gaps = random.Random(1)
    at = time.time()
    acks = {}
    for _ in range(int(rate * seconds)):
        w = at - time.time()
        if w > 0:
            time.sleep(w)
        cur.execute(stmt, (make(time.time()),))
        acks[cur.fetchone()[0]] = time.time()
        at += gaps.expovariate(rate) if random_arrivals else 1.0 / rate
    return acks


def steady_consumer(kind, out, stop, qname=None, table=None):
    """One steady-state consumer, run in a process of its own (threads would
    share the GIL with the producer and with each other, adding their waits
    to every latency).  Puts [(job id, time it had the job, send time)]."""
    c = connect(app="bench consumer")
    cur = c.cursor()
    recs = []
    in_tx = kind.endswith("_tx")
    listen = "listen" in kind
    if listen:
        cur.execute("LISTEN %s" % ("queue_" + qname if kind.startswith("queue") else table))
    while not stop.is_set():
        if in_tx:
            cur.execute("BEGIN")
        if kind.startswith("queue"):
            w = "" if listen else ", wait => '1 s'"
            cur.execute("SELECT id, payload FROM queue.claim(%%s, 100%s)" % w, (qname,))
            rows = cur.fetchall()
            t = time.time()
            if rows:
                cur.execute("SELECT queue.complete(%s::bigint[])", ([r[0] for r in rows],))
        else:  # baseline
            cur.execute(base_claim(table, 100))
            rows = cur.fetchall()
            t = time.time()
            if rows:
                cur.execute("DELETE FROM %s WHERE id = ANY (%%s)" % table, ([r[0] for r in rows],))
        if in_tx:
            cur.execute("COMMIT")
        recs.extend((r[0], t, r[1]["ts"]) for r in rows)
        if rows or not listen:
            continue
        # a notification that came with the last result is already read
        if c.notifies:
            del c.notifies[:]
            continue
        if select.select([c], [], [], 0.5)[0]:
            c.poll()
            del c.notifies[:]
    c.close()
    out.put(recs)


def pgq_steady_consumer(q, out, stop, poll=0.1):
    c = connect(autocommit=False, app="bench pgq consumer")
    cur = c.cursor()
    recs = []
    while not stop.is_set():
        cur.execute("SELECT pgq.next_batch(%s, 'c')", (q,))
        bid = cur.fetchone()[0]
        if bid is None:
            c.commit()
            time.sleep(poll)
            continue
        cur.execute("SELECT ev_id, ev_data FROM pgq.get_batch_events(%s)", (bid,))
        rows = cur.fetchall()
        t = time.time()
        recs.extend((i, t, json.loads(d)["ts"]) for i, d in rows)
        cur.execute("SELECT pgq.finish_batch(%s)", (bid,))
        c.commit()
    c.close()
    out.put(recs)


STEADY_KIND = {
    "LISTEN queue_<name>, claim 100": "queue_listen",
    "claim(wait => 1 s), 100": "queue_wait",
    "claim(wait => 1 s), 100, in the consumer's txn": "queue_wait_tx",
    "LISTEN + pg_notify() per job, claim 100": "baseline_listen",
    "LISTEN + pg_notify() per job, claim 100, in the consumer's txn": "baseline_listen_tx",
    "LISTEN queue_<name>, claim 100, random arrivals": "queue_listen",
    "LISTEN + pg_notify() per job, claim 100, random arrivals": "baseline_listen",
}
# queue's variants have a queue each: quick mode runs them at once
STEADY_QUEUE = {"LISTEN queue_<name>, claim 100": "bl", "claim(wait => 1 s), 100": "blw",
                "claim(wait => 1 s), 100, in the consumer's txn": "blt",
                "LISTEN queue_<name>, claim 100, random arrivals": "blr"}


def run_steady(cfg, res, system, variant):
    """End-to-end latency at a fixed offered load.  Latency runs from the
    producer's commit (the enqueue call returned) to the moment a consumer
    has the job: claim returned it, inside the consumer's transaction for the
    "in the consumer's txn" variants, after the claim committed otherwise.
    The time from the producer's send is reported beside it."""
    rate, secs = cfg.steady_rate, cfg.steady_s
    consumers = 2
    if system in ("pgboss", "graphile"):
        reset(system)
        r = node({"cmd": "steady", "system": system, "rate": rate, "seconds": secs, "consumers": consumers}, timeout=600)
        lat_stats = r
        got = r["n"]
    else:
        # forked from a lane, a child could inherit a lock another lane holds
        mp = multiprocessing.get_context("forkserver" if PARALLEL else "fork")
        stop, out = mp.Event(), mp.Queue()
        procs = []
        if system == "queue":
            qn = STEADY_QUEUE[variant]
            queue_recreate(qn)
            stmt = "SELECT queue.enqueue('%s', %%s::jsonb)" % qn
            for _ in range(consumers):
                procs.append(mp.Process(target=steady_consumer, args=(STEADY_KIND[variant], out, stop), kwargs={"qname": qn}))
        elif system == "baseline":
            sql("TRUNCATE base_lat")
            stmt = ("WITH j AS (INSERT INTO base_lat (payload) VALUES (%s::jsonb) RETURNING id), "
                    "n AS (SELECT pg_notify('base_lat', '')) SELECT j.id FROM j, n")
            for _ in range(consumers):
                procs.append(mp.Process(target=steady_consumer, args=(STEADY_KIND[variant], out, stop), kwargs={"table": "base_lat"}))
        elif system == "pgq":
            pgq_recreate("pql")
            stmt = "SELECT pgq.insert_event('pql', 'job', %s)"
            consumers = 1
            procs.append(mp.Process(target=pgq_steady_consumer, args=("pql", out, stop)))
        quiesce()
        for p in procs:
            p.start()
        time.sleep(0.5)
        pc = connect(app="bench producer")
        acks = producer_loop(pc, stmt, lambda ts: make_payload(100, ts=ts), rate, secs,
                             random_arrivals=variant.endswith("random arrivals"))
        pc.close()
        # let the consumers catch up (PgQ waits for its next tick), then stop them
        time.sleep(3.0 if system == "pgq" else 1.0)
        stop.set()
        recs = []
        for p in procs:
            try:
                recs += out.get(timeout=30)
            except stdqueue.Empty:
                pass  # a consumer that died: its jobs show as not received
        for p in procs:
            p.join(timeout=15)
            if p.is_alive():
                p.terminate()
        lat = [(t - acks[i]) * 1000 for i, t, _ in recs if i in acks]
        sent = [(t - ts) * 1000 for _, t, ts in recs]
        got = len(recs)
        lat_stats = {"p50": pct(lat, 50), "p95": pct(lat, 95), "p99": pct(lat, 99), "max": max(lat) if lat else None,
                     "send_p50": pct(sent, 50), "send_p99": pct(sent, 99)}
    for m in ("p50", "p95", "p99", "max", "send_p50", "send_p99"):
        if lat_stats.get(m) is not None:
            res.add("latency", variant, system, consumers, 0, m.replace("_", " "), round(lat_stats[m], 2), "ms")
    res.add("latency", variant, system, consumers, 0, "received", got, "jobs", "of %d sent" % int(rate * secs))


# ---------------------------------------------------------------- scheduled
def warn_overran(res, system, lead):
    res.warn("scheduled %s" % system, "storing the jobs took longer than the %g s lead: "
             "the first ones were late before they were stored" % lead)


def run_scheduled(cfg, res, system, rep=0):
    n, spread, lead = cfg.sched_n, cfg.sched_spread, cfg.sched_lead
    variant = "%d jobs due over %g s" % (n, spread)
    if system in ("pgboss", "graphile"):
        reset(system)
        r = node({"cmd": "scheduled", "system": system, "n": n, "spread": spread, "lead": lead}, timeout=600)
        late, got = r, r["got"]
        if r.get("overran"):
            warn_overran(res, system, lead)
    else:
        quiesce()
        if system == "queue":
            queue_recreate("bs")
        else:
            sql("TRUNCATE base_sched")
        lat = []
        stop = threading.Event()

        def consumer():
            c = connect(app="bench sched consumer")
            cur = c.cursor()
            while not stop.is_set():
                if system == "queue":
                    cur.execute("SELECT id, payload FROM queue.claim('bs', 100, wait => '1 s')")
                    rows = cur.fetchall()
                    t = time.time()
                    if rows:
                        lat.extend((t - r[1]["due"]) * 1000 for r in rows)
                        cur.execute("SELECT queue.complete(%s::bigint[])", ([r[0] for r in rows],))
                else:
                    cur.execute(base_claim("base_sched", 100))
                    rows = cur.fetchall()
                    t = time.time()
                    if rows:
                        lat.extend((t - r[1]["due"]) * 1000 for r in rows)
                        cur.execute("DELETE FROM base_sched WHERE id = ANY (%s)", ([r[0] for r in rows],))
                    else:
                        # as a careful hand-written consumer does: sleep until
                        # the next job is due, and at most 100 ms (new jobs)
                        cur.execute("SELECT extract(epoch FROM min(run_at) - clock_timestamp()) FROM base_sched "
                                    "WHERE locked_until IS NULL")
                        due = cur.fetchone()[0]
                        time.sleep(0.1 if due is None else min(0.1, max(0.0, float(due))))
            c.close()
        # The consumers run before the jobs are stored, as in an application,
        # and the lead counts from then. It used to count from before the
        # table was reset and the jobs stored and checkpointed: in run
        # 20261126T104344Z that took a second longer than the lead, and the
        # first second's jobs were late by the wait for the consumers (p99
        # 856 ms = max 1,053 ms less the 100 jobs due after the first).
        ts = [threading.Thread(target=consumer) for _ in range(2)]
        for t in ts:
            t.start()
        start = time.time() + lead
        jobs = ("SELECT jsonb_build_object('due', extract(epoch FROM t), 'pad', %s) AS p, t "
                "FROM (SELECT to_timestamp(%s + i * %s) AS t FROM generate_series(0, %s - 1) i) s")
        sql("SELECT count(queue.enqueue('bs', p, run_at => t)) FROM (%s) j" % jobs if system == "queue"
            else "INSERT INTO base_sched (payload, run_at) " + jobs, ("x" * 60, start, spread / n, n))
        if time.time() > start:
            warn_overran(res, system, lead)
        # what taking them on time costs the server: the consumers' claims
        # and queue's worker, which steps in when they do not
        meter = WalMeter()
        deadline = start + spread + 30
        while len(lat) < n and time.time() < deadline:
            time.sleep(0.1)
        stop.set()
        for t in ts:
            t.join(timeout=15)
        got = len(lat)
        meter.record(res, "scheduled", variant, system, 2, rep, got)
        late = {"p50": pct(lat, 50), "p99": pct(lat, 99), "max": max(lat) if lat else None}
    for m in ("p50", "p99", "max"):
        if late.get(m) is not None:
            res.add("scheduled", variant, system, 2, rep, "lateness " + m, round(late[m], 1), "ms")
    res.add("scheduled", variant, system, 2, rep, "received", got, "jobs", "of %d" % n)


# ---------------------------------------------------------------- orphans
def run_orphans(cfg, res, system, n=1000, lease=10):
    variant = "%d claimed jobs, consumer killed, lease %d s" % (n, lease)
    cap = {"graphile": min(cfg.orphan_cap, 10.0), "pgboss": cfg.orphan_cap * 1.25}.get(system, cfg.orphan_cap)
    reaper_stop = threading.Event()
    extra_procs = []
    note = ""
    if system == "queue":
        queue_recreate("bo", lease="%d seconds" % lease)
        sql("SELECT count(*) FROM queue.enqueue_batch('bo', (SELECT array_agg(%%s::jsonb) FROM generate_series(1, %d)))" % n,
            (make_payload(),))
        holder = connect(app="bench holder")
        holder.cursor().execute("SELECT count(*) FROM queue.claim('bo', %s)", (n,))
        pid = holder.get_backend_pid()
        # a job under a batch lease is a ready row its lease lists: claimable
        # jobs are the ready rows no lease lists (the worker ends a lease and
        # makes its rows ready again in one transaction)
        ready_q = ("SELECT (SELECT count(*) FROM queue.q_bo WHERE state = 'ready')"
                   " - (SELECT coalesce(sum(cardinality(ids)), 0) FROM queue.l_bo)")
    elif system == "baseline":
        sql("TRUNCATE base_orph")
        sql("INSERT INTO base_orph (payload) SELECT %%s::jsonb FROM generate_series(1, %d)" % n, (make_payload(),))
        holder = connect(app="bench holder")
        holder.cursor().execute(base_claim("base_orph", n, "%d seconds" % lease))
        pid = holder.get_backend_pid()
        ready_q = "SELECT count(*) FROM base_orph WHERE locked_until IS NULL"
        note = "reaper UPDATE every 1 s returns expired leases"

        def reaper():
            c = connect(app="bench reaper")
            while not reaper_stop.wait(1.0):
                c.cursor().execute("UPDATE base_orph SET locked_until = NULL WHERE locked_until < now()")
            c.close()
        threading.Thread(target=reaper, daemon=True).start()
    elif system == "pgq":
        pgq_ticked("po", n, make_payload())
        holder = connect(app="bench holder")
        bid, held = pgq_take(holder.cursor(), "po")
        pid = holder.get_backend_pid()
        ready_q = None
        note = "batch of %s events; the same batch is handed to the consumer's next next_batch()" % held
    else:
        # a Node process takes the jobs through the system's API and holds them;
        # its connections are the ones killed, found by their application_name
        appname = "orphan holder %s" % system
        env = dict(os.environ, PGDATABASE=DB, PGAPPNAME=appname)
        sql("SELECT pg_stat_clear_snapshot()")
        if system == "pgboss":
            node({"cmd": "reset", "system": "pgboss"})
        else:
            node({"cmd": "reset", "system": "graphile"})
        pr = subprocess.Popen([NODE, NODE_SCRIPT, json.dumps({"cmd": "hold", "system": system, "n": n, "lease": lease})],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=os.path.join(HERE, "node"), env=env)
        line = pr.stdout.readline()
        if "holding" not in line:
            pr.kill()
            raise RuntimeError("holder did not start: %s %s" % (line, pr.stderr.read()[-2000:]))
        time.sleep(0.5)
        pid = None
        if system == "pgboss":
            ready_q = "SELECT count(*) FROM pgboss.job WHERE name = 'pb' AND state IN ('created', 'retry')"
            # recovery needs a running pg-boss with its supervisor, defaults
            sup = subprocess.Popen([NODE, NODE_SCRIPT, json.dumps({"cmd": "supervise", "seconds": cap + 30})],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=os.path.join(HERE, "node"),
                                   env=dict(env, PGAPPNAME="orphan supervisor"))
            sup.stdout.readline()
            extra_procs.append(sup)
            note = "expireInSeconds %d; a running pg-boss (default superviseIntervalSeconds 60) fails/retries expired jobs" % lease
        else:
            ready_q = "SELECT count(*) FROM graphile_worker._private_jobs WHERE locked_at IS NULL"
            note = "locked jobs are released after 4 h (graphile-worker's fixed lock timeout)"
        holder = None
        held_pids = [r[0] for r in sql("SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
                                       (DB, appname), fetch="all")]
        if not held_pids:
            pr.kill()
            raise RuntimeError("no connection of the holder (application_name %r) found" % appname)
    # PgQ's second consumer connects beforehand: no system is charged for a
    # connection's start-up
    c2 = connect(app="bench pgq consumer 2") if system == "pgq" else None
    if c2 is not None:
        # and has run PgQ's functions once, as queue's long-lived worker has
        pgq_ticked("po_warm", 1, "x")
        wc = c2.cursor()
        wb, _ = pgq_take(wc, "po_warm")
        if wb is not None:
            wc.execute("SELECT pgq.finish_batch(%s)", (wb,))
    t0 = time.time()
    if system in ("pgboss", "graphile"):
        pr.kill()
        pr.wait()
        for p_ in held_pids:
            sql("SELECT pg_terminate_backend(%s)", (p_,))
    else:
        sql("SELECT pg_terminate_backend(%s)", (pid,))
    recovered = None
    # when the killed backend had left (the sessions of the Node clients are
    # several): the part of a recovery that is the server's, not the queue's
    gone = None
    gone_q = "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = %d)" % pid if holder is not None else None
    if system == "pgq":
        b2, got = pgq_take(c2.cursor(), "po")
        recovered = time.time() - t0 if (b2 == bid and got == held) else None
        c2.close()
    else:
        # every millisecond for the first second, so that the figure's
        # resolution is finer than the fastest systems' recovery
        while time.time() - t0 < cap:
            k, left = sql("SELECT (%s), (%s)" % (ready_q, gone_q or "SELECT NULL"), fetch="one")
            if left and gone is None:
                gone = time.time() - t0
            if k >= n:
                recovered = time.time() - t0
                break
            time.sleep(0.001 if time.time() - t0 < 1.0 else 0.01)
    while gone_q and gone is None and time.time() - t0 < cap:
        if sql(gone_q, fetch="val"):
            gone = time.time() - t0
        else:
            time.sleep(0.001)
    reaper_stop.set()
    for p_ in extra_procs:
        p_.kill()
        p_.wait()
    if recovered is None:
        res.add("orphans", variant, system, 1, 0, "recovery", "> %g" % cap, "s", note + " (not recovered within %g s)" % cap)
    else:
        res.add("orphans", variant, system, 1, 0, "recovery", round(recovered, 3), "s", note)
    if gone is not None:
        res.add("orphans", variant, system, 1, 0, "killed backend gone", round(gone, 3), "s")


# ---------------------------------------------------------------- MVCC horizon
def run_horizon(cfg, res, system, holder_kind, outdir):
    clean, held, after = cfg.horizon
    total = clean + held + after
    rate = cfg.horizon_rate
    window = cfg.horizon_window
    variant = "idle in transaction with an xid" if holder_kind == "xid" else "REPEATABLE READ reader"
    p = make_payload()
    backlog_n = 20000 if not cfg.quick else 4000
    if system == "queue":
        queue_recreate("bh")
        sql("SELECT count(*) FROM queue.enqueue_batch('bh', (SELECT array_agg(%%s::jsonb) FROM generate_series(1, %d)))" % backlog_n, (p,))
        prod = "SELECT queue.enqueue('bh', :p::jsonb);\n"
        cons = ("BEGIN;\nSELECT coalesce(max(id), 0) AS id FROM queue.claim('bh', 1) \\gset\n"
                "\\if :id > 0\nSELECT queue.complete(:id::bigint);\n\\endif\nCOMMIT;\n")
        tables = ["queue.q_bh", "queue.a_bh"]
    elif system in ("pgboss", "graphile"):
        # their own Node clients (bench.mjs horizon), over a standing backlog
        reset(system)
        node({"cmd": "fill", "system": system, "target": backlog_n})
        tables = [sql("SELECT 'pgboss.' || quote_ident(table_name) FROM pgboss.queue WHERE name = 'pb'", fetch="val")
                  if system == "pgboss" else "graphile_worker._private_jobs"]
    else:
        sql("DROP TABLE IF EXISTS base_h")
        sql(BASE_DDL.format(t="base_h"))
        sql("INSERT INTO base_h (payload) SELECT %%s::jsonb FROM generate_series(1, %d)" % backlog_n, (p,))
        prod = "INSERT INTO base_h (payload) VALUES (:p::jsonb);\n"
        cons = ("BEGIN;\nWITH c AS (%s) SELECT coalesce(max(id), 0) AS id FROM c \\gset\n"
                "\\if :id > 0\nDELETE FROM base_h WHERE id = :id::bigint;\n\\endif\nCOMMIT;\n" % base_claim("base_h", 1))
        tables = ["base_h"]
    sql("VACUUM ANALYZE %s" % tables[0])
    quiesce()
    logdir = tempfile.mkdtemp(prefix="hz_", dir="/tmp")
    os.chmod(logdir, 0o777)
    samples = []
    out = {}

    def bench(name, script, clients):
        try:
            out[name] = pgbench(script, clients, total, {"p": p}, rate=rate, logprefix=os.path.join(logdir, name))
        except Exception as e:  # noqa
            out[name] = e
    def node_clients():
        try:
            out["node"] = node({"cmd": "horizon", "system": system, "rate": rate, "seconds": total, "consumers": 2,
                                "start": t0 * 1000, "window": window}, total + 120)
        except Exception as e:  # noqa
            out["node"] = e
    if system in ("pgboss", "graphile"):
        t0 = time.time() + 3  # the Node client's start-up
        threads = [threading.Thread(target=node_clients)]
    else:
        t0 = time.time()
        threads = [threading.Thread(target=bench, args=("prod", prod, 2)),
                   threading.Thread(target=bench, args=("cons", cons, 2))]
    for t in threads:
        t.start()
    holder = None
    next_sample = t0
    phase = "clean"
    while any(t.is_alive() for t in threads):
        now = time.time() - t0
        if phase == "clean" and clean <= now < clean + held:
            holder = connect(autocommit=False, app="bench horizon holder")
            hc = holder.cursor()
            if holder_kind == "xid":
                hc.execute("SELECT txid_current()")
            else:
                hc.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                hc.execute("SELECT count(*) FROM pg_class")
            phase = "held"
        if phase == "held" and now >= clean + held:
            holder.rollback()
            holder.close()
            holder = None
            phase = "after"
        if time.time() >= next_sample:
            rel = tables[0]
            r = sql("SELECT n_dead_tup, pg_total_relation_size(%s::regclass) FROM pg_stat_user_tables WHERE relid = %s::regclass",
                    (rel, rel), fetch="one")
            samples.append((now, phase, r[0], r[1]))
            next_sample += window
        time.sleep(0.05)
    if holder:
        holder.rollback()
        holder.close()
    for k in ("prod", "cons", "node"):
        if isinstance(out.get(k), Exception):
            raise out[k]
    # per-window consumer throughput and transaction latency from pgbench's
    # log, or as the Node client counted them
    lat_by_w = {}
    node_w = {w["w"]: w for w in out["node"]["windows"]} if "node" in out else None
    for fn in os.listdir(logdir):
        if not fn.startswith("cons"):
            continue
        with open(os.path.join(logdir, fn)) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                tend = int(parts[4]) + int(parts[5]) / 1e6
                if parts[2] == "skipped":
                    continue
                w = int((tend - t0) // window)
                # with -R the logged time counts from the scheduled start;
                # the 7th field is how late the transaction started
                lag = int(parts[6]) if len(parts) > 6 else 0
                lat_by_w.setdefault(w, []).append((int(parts[2]) / 1000.0, (int(parts[2]) - lag) / 1000.0))
    subprocess.run(["rm", "-rf", logdir])
    nwin = int(total // window)
    series = []
    for w in range(nwin):
        start = w * window
        ph = "clean" if start + window <= clean else ("held" if start + window <= clean + held else "after")
        if start < clean < start + window or start < clean + held < start + window:
            ph = "mixed"
        elif w == 0:
            ph = "start"  # consumers and the producer starting up
        lats = lat_by_w.get(w, [])
        smp = [s for s in samples if start <= s[0] < start + window]
        dead = smp[-1][2] if smp else None
        size = smp[-1][3] if smp else None
        if node_w is not None:
            nw = node_w.get(w, {})
            n, p99, own99 = nw.get("n", 0), nw.get("p99"), nw.get("own_p99")
            p99, own99 = (round(x, 2) if x is not None else None for x in (p99, own99))
        else:
            n, p99, own99 = len(lats), pct([x[0] for x in lats], 99), pct([x[1] for x in lats], 99)
        series.append((start, ph, n / window, p99, dead, size, own99))
        res.add("horizon_series", variant, system, 2, w, "window", json.dumps(
            {"t": start, "phase": ph, "tput": round(n / window, 1), "p99_ms": p99, "own_p99_ms": own99,
             "dead": dead, "bytes": size}), "json")
    def mean(ph, i):
        v = [s[i] for s in series if s[1] == ph and s[i] is not None]
        return statistics.mean(v) if v else None
    tc_, th_, ta_ = mean("clean", 2), mean("held", 2), mean("after", 2)
    for ph, val in (("clean", tc_), ("held", th_), ("after", ta_)):
        if val is not None:
            res.add("horizon", variant, system, 2, 0, "throughput " + ph, round(val, 1), "jobs/s")
    for i, metric in ((3, "claim p99 "), (6, "claim p99, own time, ")):
        for ph in ("clean", "held", "after"):
            v = [s[i] for s in series if s[1] == ph and s[i] is not None]
            if v:
                res.add("horizon", variant, system, 2, 0, metric + ph, round(max(v), 2), "ms", "worst window")
    # The worst window is the maximum over more draws in a longer phase (10
    # windows held against 4 clean); every transaction of the phase pooled
    # compares like with like.
    if node_w is None:
        phase_of = {w: s[1] for w, s in enumerate(series)}
        for ph in ("clean", "held", "after"):
            own = [x[1] for w, lats in lat_by_w.items() if phase_of.get(w) == ph for x in lats]
            if own:
                res.add("horizon", variant, system, 2, 0, "claim p99, own time, whole phase, " + ph,
                        round(pct(own, 99), 2), "ms", "every transaction of the phase")
    if tc_ and th_ is not None:
        res.add("horizon", variant, system, 2, 0, "kept (held/clean)", round(th_ / tc_, 3), "ratio")
    if series:
        res.add("horizon", variant, system, 2, 0, "dead tuples at end of hold",
                max((s[4] or 0) for s in series if s[1] in ("held", "mixed")) if any(s[1] in ("held", "mixed") for s in series) else 0, "rows")
        res.add("horizon", variant, system, 2, 0, "table+index size max", round(max((s[5] or 0) for s in series) / 1048576, 1), "MB")


# ---------------------------------------------------------------- groups
def run_groups(cfg, res, groups, seconds, rates, rep):
    variant = "ungrouped" if groups is None else "%d group_key%s" % (groups, "" if groups == 1 else "s")
    p = make_payload()
    key = ("groups", groups)
    est = rates.get(key, 50000)
    n = int(est * seconds * 2.5 * cfg.backlog_scale) + 2000
    if groups is not None and groups > n:
        n = groups
    qn = "bg" if groups is None else "bg%d" % groups  # a queue per variant: quick mode runs them at once
    queue_recreate(qn)
    if groups is None:
        # (enqueue_batch takes at most 1,000,000 jobs per call)
        for lo in range(0, n, 100000):
            sql("SELECT count(*) FROM queue.enqueue_batch(%%s, (SELECT array_agg(%%s::jsonb) FROM generate_series(1, %d)))"
                % (min(n, lo + 100000) - lo), (qn, p))
    else:
        # producers enqueue in transactions of 1,000 jobs (each distinct
        # group_key in a transaction takes a lock until its end)
        for lo in range(0, n, 1000):
            sql("SELECT count(queue.enqueue(%%s, %%s::jsonb, group_key => 'g' || (i %%%% %d))) "
                "FROM generate_series(%d, %d) i" % (groups, lo + 1, min(n, lo + 1000)), (qn, p))
    sql("VACUUM ANALYZE queue.q_%s" % qn)
    quiesce()
    before = sql("SELECT count(*) FROM queue.q_%s" % qn, fetch="val")
    script = ("BEGIN;\nSELECT coalesce(array_agg(id), '{}') AS ids, sum(length(payload::text)) AS bytes "
              "FROM queue.claim('%s', 100) \\gset\nSELECT queue.complete(:ids::bigint[]);\nCOMMIT;\n" % qn)
    r = pgbench(script, 4, seconds)
    after = sql("SELECT count(*) FROM queue.q_%s" % qn, fetch="val")
    rate = (before - after) / r["seconds"]
    rates[key] = max(rate, 1)
    res.add("groups", variant, "queue", 4, rep, "throughput", round(rate, 1), "jobs/s", "backlog %d" % before)
    res.add("groups", variant, "queue", 4, rep, "jobs per claim", round((before - after) / max(r["tx"], 1), 1), "jobs")


# ---------------------------------------------------------------- main
def dump_scripts(outdir):
    """Write every pgbench script the suite uses into OUTDIR/scripts/."""
    d = os.path.join(outdir, "scripts")
    os.makedirs(d, exist_ok=True)
    for s in ("queue", "queue_noarch", "baseline", "pgq", "floor"):
        for b in (1, 100):
            with open(os.path.join(d, "enqueue_%s_%d.sql" % (s, b)), "w") as f:
                f.write(enqueue_script(s, b))
            for mode in ["tx", "leased"] + list(FLOOR_MODES):
                if not drains(s, b, mode):
                    continue
                with open(os.path.join(d, "drain_%s_%d_%s.sql" % (s, b, mode)), "w") as f:
                    f.write(drain_script(s, b, mode))
    with open(os.path.join(d, "README"), "w") as f:
        f.write("pgbench -n -M prepared -c CLIENTS -j min(CLIENTS,nproc) -T SECONDS -f SCRIPT\n"
                "  -D p=<payload JSON> (1 job/txn), -D arr=<text array of 100 payloads> (100 jobs/txn),\n"
                "  -D n=0 (drains: the raw floor's per-client counter).\n"
                "Drain backlogs are topped up before each run; PgQ drain queues are pq_<client_id>.\n")


def main():
    outdir = sys.argv[1]
    if "--dump-scripts" in sys.argv:
        dump_scripts(outdir)
        return 0
    quick = "--quick" in sys.argv
    only = None
    if "--only" in sys.argv:
        only = set(sys.argv[sys.argv.index("--only") + 1].split(","))
    cfg = Cfg(quick)
    global PARALLEL
    PARALLEL = quick
    res = Results(os.path.join(outdir, "raw.csv"))
    systems = cfg.systems
    want = lambda w: only is None or w in only  # noqa
    t_start = time.time()
    timings = {}
    log("setting up")
    setup_db()
    # The first cell measured used to pay for the cold machine: the build's
    # and the installs' dirty pages being written back while it fsyncs.  In
    # run 20261122T173930Z the first two cells (queue, then queue without
    # archive, one enqueuing client) ran at 0.48x and 0.39x, the rest of
    # the cell at the usual rates.  So flush, then commit single rows for a
    # while, unmeasured, before anything is.
    log("warming up")
    os.sync()
    pgbench("INSERT INTO floor_ins (payload) VALUES ('{}');\n", 1, 3 if cfg.quick else 10)
    sql("TRUNCATE floor_ins RESTART IDENTITY")

    def rotated(rep):
        # each rep starts the cell with a different system, so that none is
        # always the one that runs right after another cell's last system
        k = rep % len(systems)
        return systems[k:] + systems[:k]

    def guarded(what, f, *a):
        log(what)
        t0 = time.time()
        try:
            f(*a)
            if PARALLEL:
                log("%s: %.1f s" % (what, time.time() - t0))
        except Exception as e:  # noqa
            res.fail(what, e)

    def run_lanes(cells):
        """Run cells (lane, what, function, args...): one at a time in the
        order given, or in quick mode each lane's cells in that order in a
        thread of its own, every lane at once.  A lane is what must not run
        beside itself: a system's tables, or one queue."""
        if not PARALLEL:
            for _, what, f, *a in cells:
                guarded(what, f, *a)
            return
        lanes = {}
        for c in cells:
            lanes.setdefault(c[0], []).append(c[1:])

        def lane(todo):
            for what, f, *a in todo:
                guarded(what, f, *a)
            if getattr(_local, "admin", None) is not None:
                _local.admin.close()
        ts = [threading.Thread(target=lane, args=(todo,)) for todo in lanes.values()]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    # ---- enqueue: single jobs and batches of 100; bulk 10,000
    def w_enqueue():
        cells = []
        # Single jobs: every client count runs `enq1_reps` times, the bar
        # (within 10% of a plain INSERT) holding at each.
        for rep in range(max(cfg.reps, cfg.enq1_reps)):
            if rep < cfg.enq1_reps:
                for clients in cfg.clients:
                    for s in rotated(rep):
                        cells.append((s, "enqueue %s c%d" % (s, clients), partial(run_enqueue, rep=rep),
                                      cfg, res, s, clients, 1, cfg.enq1_s))
                        # what handing the id back costs a plain INSERT:
                        # queue.enqueue() returns it, the floor's does not
                        if s == "floor":
                            cells.append((s, "enqueue floor c%d, id returned" % clients,
                                          partial(run_enqueue, rep=rep, returning=True),
                                          cfg, res, s, clients, 1, cfg.enq1_s))
                # the bar holds "even with listeners present": sessions that
                # LISTEN for new jobs and read what they hear (queue coalesces
                # its NOTIFYs; the baseline sends one per job, as its consumers
                # expect)
                for s in rotated(rep):
                    if s in CHANNEL:
                        cells.append((s, "enqueue %s c%d, %d listeners" % (s, cfg.listen_clients, cfg.listeners),
                                      partial(run_enqueue, rep=rep, listeners=cfg.listeners),
                                      cfg, res, s, cfg.listen_clients, 1, cfg.enq1_s))
            if rep < cfg.reps:
                for s in rotated(rep):
                    cells.append((s, "enqueue100 %s" % s, partial(run_enqueue, rep=rep), cfg, res, s, 4, 100,
                                  cfg.enq_s))
                for s in rotated(rep):
                    cells.append((s, "bulk %s" % s, run_bulk, cfg, res, s, 10000, rep))
        return cells

    # ---- drain a preloaded backlog
    rates = {}

    def w_drain():
        cells = []
        for rep in range(cfg.reps):
            for batch, mode in cfg.drain_matrix:
                for clients in cfg.drain_clients:
                    # the floor's archived leases run with every client count:
                    # PgQ's leased drains are compared with them
                    if clients != cfg.main_clients and mode in ("batch", "read", "keep"):
                        continue
                    for s in rotated(rep):
                        target_cell = batch == 100 and (s, mode) in JUDGED_CELLS
                        if clients != cfg.main_clients and rep >= cfg.side_reps and not target_cell:
                            continue
                        if drains(s, batch, mode):
                            cells.append((s, "drain %s b%d %s c%d" % (s, batch, mode, clients), partial(run_drain, rep=rep),
                                          cfg, res, s, clients, batch, mode, cfg.drain_s, rates))
        return cells

    # ---- payload size: enqueue (4 clients) and drain (claim 100, one txn, 4 consumers)
    def w_payload():
        cells = []
        for rep in range(cfg.side_reps):
            for nbytes in cfg.payloads:
                label = {100: "100 B", 2048: "2 KB", 65536: "64 KB"}[nbytes]
                for s in systems:
                    cells.append((s, "payload enq %s %s" % (s, label),
                                  partial(run_enqueue, nbytes=nbytes, workload="payload enqueue", variant=label, rep=rep),
                                  cfg, res, s, 4, 1, cfg.enq_s))
                # Drop what the enqueue cells left before any drain.  Left in
                # place (up to 0.8 GB per system at 64 KB), it piled up in the
                # first drain's path: queue's, first in every cell, ran 0.76x
                # and 0.80x the raw floor's archiving drain after all seven
                # systems' 64 KB enqueue cells, 1.20x after two of them
                # (20261129T125643Z, 20261129T133716Z, 20261129T140948Z).
                for s in systems:
                    cells.append((s, "payload drop %s %s" % (s, label), reset, s))
                for s in systems:
                    mode = "leased" if s == "graphile" else "tx"
                    cells.append((s, "payload drain %s %s" % (s, label),
                                  partial(run_drain, nbytes=nbytes, workload="payload drain", variant=label, rep=rep),
                                  cfg, res, s, 4, 100, mode, cfg.drain_s, rates))
                    if s == "floor":
                        for mode in ("read", "keep"):
                            cells.append((s, "payload drain %s %s %s" % (s, label, mode),
                                          partial(run_drain, nbytes=nbytes, workload="payload drain", rep=rep,
                                                  variant="%s, %s" % (label, FLOOR_MODES[mode].replace("one txn, ", ""))),
                                          cfg, res, s, 4, 100, mode, cfg.drain_s, rates))
                cells.append(("output", "payload output %s" % label, partial(run_output, rep=rep), cfg, res, nbytes))
        return cells

    # ---- steady state latency
    def w_latency():
        plan = []
        if "queue" in systems:
            plan += [("queue", v) for v in STEADY_KIND if STEADY_KIND[v].startswith("queue")]
        if "baseline" in systems:
            plan += [("baseline", v) for v in STEADY_KIND if STEADY_KIND[v].startswith("baseline")]
        if "pgq" in systems:
            plan += [("pgq", "pgqd ticker (defaults), next_batch polled every 100 ms")]
        if "pgboss" in systems:
            plan += [("pgboss", "work() with queue notify + useListenNotify, batch 100")]
        if "graphile" in systems:
            plan += [("graphile", "run() (LISTEN on new jobs), concurrency 2")]
        # queue's variants have a queue each; the baseline's share its table
        return [(s + (v if s == "queue" else ""), "latency %s" % s, run_steady, cfg, res, s, v) for s, v in plan]

    # ---- scheduled jobs
    def w_sched():
        # `reps` times: a p99 of 10,000 jobs is a tail of 100, which one
        # hiccup of this shared VM moves
        return [(s, "scheduled %s" % s, partial(run_scheduled, rep=rep), cfg, res, s)
                for rep in range(cfg.reps) for s in rotated(rep) if s not in ("pgq", "floor", "queue_noarch")]

    # ---- orphans
    def w_orphans():
        return [(s, "orphans %s" % s, run_orphans, cfg, res, s) for s in systems if s not in ("floor", "queue_noarch")]

    # ---- groups (queue only)
    def w_groups():
        if "queue" not in systems:
            return []
        return [("groups %s" % g, "groups %s" % g, run_groups, cfg, res, g, cfg.drain_s, rates, rep)
                for rep in range(cfg.side_reps) for g in cfg.groups]

    # ---- MVCC horizon
    def w_horizon():
        return [(s, "horizon %s %s" % (s, kind), run_horizon, cfg, res, s, kind, outdir)
                for kind in ("xid", "rr") for s in ("queue", "baseline", "pgboss", "graphile")
                if s in systems and s in cfg.horizon_systems]

    sections = [("enqueue", w_enqueue), ("drain", w_drain), ("payload", w_payload), ("latency", w_latency),
                ("scheduled", w_sched), ("orphans", w_orphans), ("groups", w_groups), ("horizon", w_horizon)]
    sections = [(name, build) for name, build in sections if want(name)]
    if PARALLEL:
        # one go: a system's lane runs its cells of every workload in order
        parts = sections
        sections = [(" + ".join(name for name, _ in parts), lambda: [c for _, b in parts for c in b()])]
    for name, build in sections:
        t0 = time.time()
        log("== %s" % name)
        run_lanes(build())
        timings[name] = time.time() - t0
        log("== %s done in %.0f s" % (name, timings[name]))

    with open(os.path.join(outdir, "timings.json"), "w") as f:
        json.dump({"sections": timings, "total": time.time() - t_start, "failures": res.failures,
                   "warnings": res.warnings}, f, indent=1)
    res.f.close()
    log("done in %.0f s, %d failures" % (time.time() - t_start, len(res.failures)))
    return 1 if res.failures else 0


if __name__ == "__main__":
    sys.exit(main())
