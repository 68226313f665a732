#!/usr/bin/python3
"""A worker loop for the `queue` extension, with psycopg2.

    consumer.py QUEUE COUNT [--leased] [--batch N] [--poll SECONDS] [--work-ms MS]

Processes COUNT jobs of QUEUE, then exits (0 on success).  Each processed
job is printed to stdout as "job ID ATTEMPT PAYLOAD"; a summary goes to
stderr.  Connection settings come from the usual libpq environment
variables (PGHOST, PGPORT, PGUSER, PGDATABASE, ...).

The loop:

  LISTEN queue_<QUEUE>              (once, at start)
  loop:
      claim up to --batch jobs
      if none: sleep in select() on the connection's socket until a
               notification arrives (or --poll seconds pass, as a safety
               net), then claim again

Two ways of consuming (see docs/api.md):

  default     exactly-once: claim, do the work and complete in ONE
              transaction.  If the worker crashes, the transaction rolls
              back and the jobs are claimable again; the work's own
              database writes (if any) commit together with complete().

  --leased    at-least-once: claim commits on its own (the jobs are
              running under a lease), the work happens outside any
              transaction, then complete(id, attempt) or, if the work
              raised, fail(id, error, attempt => attempt).  The attempt
              number is the fencing token: if the lease ran out and
              another worker re-claimed the job, complete/fail change
              nothing.

A job whose payload has "fail_first_attempt": true raises on its first
attempt, to show the failure path: queue.fail() records the error and the
job comes back after the queue's backoff.  In the default mode the work
runs under a savepoint, so a failure (even a database error) undoes only
that job's writes and fail() is recorded in the same transaction.
"""
import argparse
import json
import select
import sys
import time

import psycopg2


class WorkFailed(Exception):
    pass


def do_work(cur, payload, attempt, work_ms):
    """The job itself: here, pretend to do something.

    Database writes made with cur belong to the job: in the default mode
    they commit together with complete() (exactly once) or roll back with
    the job's savepoint if the work fails.
    """
    if payload.get("fail_first_attempt") and attempt == 1:
        raise WorkFailed("simulated failure of job n=%s on attempt 1" % payload.get("n"))
    if work_ms:
        time.sleep(work_ms / 1000.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("queue")
    ap.add_argument("count", type=int, help="number of jobs to process, then exit")
    ap.add_argument("--leased", action="store_true",
                    help="at-least-once mode: claim commits, work outside the transaction")
    ap.add_argument("--batch", type=int, default=10, help="jobs per claim (default 10)")
    ap.add_argument("--poll", type=float, default=10.0, metavar="SECONDS",
                    help="longest wait for a notification before claiming anyway (default 10)")
    ap.add_argument("--work-ms", type=int, default=0, help="simulated work per job")
    args = ap.parse_args()

    conn = psycopg2.connect("")
    # Autocommit: we issue BEGIN/COMMIT ourselves where we want a
    # transaction, and the connection is idle (so notifications are
    # delivered) while we wait.
    conn.autocommit = True
    cur = conn.cursor()

    # psycopg2 quotes values as literals, not identifiers: build the channel
    # name ourselves (queue names are [a-z][a-z0-9_]*, so no quoting needed).
    cur.execute("LISTEN queue_" + args.queue)
    print("listening on queue_%s" % args.queue, file=sys.stderr, flush=True)

    done = failed = lost = 0
    claims = empty_claims = notified_wakeups = timeouts = 0

    while done < args.count:
        # Forget notifications received so far: the claim below sees every
        # job they announced.  Anything arriving from now on is news.
        conn.poll()
        del conn.notifies[:]

        want = min(args.batch, args.count - done)
        if not args.leased:
            # ---- exactly-once: claim, work, complete in one transaction
            cur.execute("BEGIN")
            cur.execute("SELECT id, payload, attempt FROM queue.claim(%s, %s)",
                        (args.queue, want))
            jobs = cur.fetchall()
            claims += 1
            finished = []
            for job_id, payload, attempt in jobs:
                # A savepoint per job: if the work fails (even with a
                # database error), undo just its writes and record the
                # failure; the rest of the batch still completes.
                cur.execute("SAVEPOINT job")
                try:
                    do_work(cur, payload, attempt, args.work_ms)
                except Exception as e:
                    cur.execute("ROLLBACK TO SAVEPOINT job")
                    cur.execute("RELEASE SAVEPOINT job")
                    cur.execute("SELECT queue.fail(%s, %s)", (job_id, str(e)))
                    outcome = cur.fetchone()[0]      # 'retry' or 'dead'
                    failed += 1
                    print("failed job %d attempt %d: %s -> %s"
                          % (job_id, attempt, e, outcome), file=sys.stderr, flush=True)
                    continue
                cur.execute("RELEASE SAVEPOINT job")
                cur.execute("SELECT queue.complete(%s)", (job_id,))
                finished.append((job_id, payload, attempt))
            cur.execute("COMMIT")
            # Only now are the jobs done: report them after the commit.
            for job_id, payload, attempt in finished:
                print("job %d %d %s" % (job_id, attempt, json.dumps(payload, sort_keys=True)), flush=True)
            done += len(finished)
        else:
            # ---- at-least-once: the claim commits by itself (autocommit)
            cur.execute("SELECT id, payload, attempt FROM queue.claim(%s, %s)",
                        (args.queue, want))
            jobs = cur.fetchall()
            claims += 1
            for job_id, payload, attempt in jobs:
                try:
                    do_work(cur, payload, attempt, args.work_ms)
                except Exception as e:
                    cur.execute("SELECT queue.fail(%s, %s, attempt => %s)",
                                (job_id, str(e), attempt))
                    outcome = cur.fetchone()[0]      # 'retry', 'dead', or NULL if stale
                    failed += 1
                    print("failed job %d attempt %d: %s -> %s"
                          % (job_id, attempt, e, outcome), file=sys.stderr, flush=True)
                    continue
                cur.execute("SELECT queue.complete(%s, %s)", (job_id, attempt))
                if cur.fetchone()[0]:
                    print("job %d %d %s" % (job_id, attempt, json.dumps(payload, sort_keys=True)), flush=True)
                    done += 1
                else:
                    # our lease ran out and someone else has the job now
                    lost += 1
                    print("lost job %d attempt %d to another worker" % (job_id, attempt),
                          file=sys.stderr, flush=True)

        if jobs:
            continue

        # ---- nothing to do: wait for a notification on the socket
        empty_claims += 1
        conn.poll()
        if conn.notifies:
            continue                # something arrived during the claim
        ready, _, _ = select.select([conn], [], [], args.poll)
        if ready:
            conn.poll()             # reads the notifications into conn.notifies
            notified_wakeups += 1
        else:
            timeouts += 1

    print("processed %d jobs of queue %s (%s): claims=%d empty=%d notified=%d "
          "timeouts=%d failed=%d lost=%d"
          % (done, args.queue, "leased" if args.leased else "exactly-once",
             claims, empty_claims, notified_wakeups, timeouts, failed, lost),
          file=sys.stderr, flush=True)
    conn.close()


if __name__ == "__main__":
    try:
        main()
    except psycopg2.Error as e:
        print("consumer: database error: %s" % e, file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
