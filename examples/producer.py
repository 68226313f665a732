#!/usr/bin/python3
"""Enqueue jobs on a queue of the `queue` extension.

    producer.py QUEUE COUNT [--batch SIZE] [--fail-first K] [--create]

Each job's payload is {"n": i} for i = 1..COUNT.  Without --batch every job
is enqueued in its own transaction with queue.enqueue(); with --batch SIZE
the jobs go in groups of SIZE per transaction with queue.enqueue_batch().
--fail-first K marks the first K jobs {"fail_first_attempt": true}, which
the example consumers treat as a failure on their first attempt.
--create creates the queue first if it does not exist.

Connection settings come from the usual libpq environment variables
(PGHOST, PGPORT, PGUSER, PGDATABASE, ...).
"""
import argparse
import json
import sys

import psycopg2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("queue")
    ap.add_argument("count", type=int)
    ap.add_argument("--batch", type=int, default=0, metavar="SIZE",
                    help="enqueue SIZE jobs per transaction with enqueue_batch")
    ap.add_argument("--fail-first", type=int, default=0, metavar="K",
                    help="the first K jobs fail on their first attempt")
    ap.add_argument("--create", action="store_true",
                    help="create the queue if it does not exist")
    args = ap.parse_args()

    conn = psycopg2.connect("")          # everything from PG* variables
    conn.autocommit = True               # each statement is its own transaction
    cur = conn.cursor()
    if args.create:
        cur.execute("SELECT queue.create(%s, if_not_exists => true)", (args.queue,))

    def payload(i):
        p = {"n": i}
        if i <= args.fail_first:
            p["fail_first_attempt"] = True
        return json.dumps(p)

    ids = []
    if args.batch > 0:
        for start in range(1, args.count + 1, args.batch):
            chunk = [payload(i) for i in range(start, min(start + args.batch, args.count + 1))]
            # one transaction per batch; ::jsonb[] because psycopg2 sends
            # a Python list of strings as text[]
            cur.execute("SELECT queue.enqueue_batch(%s, %s::jsonb[])", (args.queue, chunk))
            ids.extend(r[0] for r in cur.fetchall())
    else:
        for i in range(1, args.count + 1):
            cur.execute("SELECT queue.enqueue(%s, %s)", (args.queue, payload(i)))
            ids.append(cur.fetchone()[0])

    print("enqueued %d jobs on queue %s (ids %s..%s)"
          % (len(ids), args.queue, ids[0] if ids else "-", ids[-1] if ids else "-"),
          file=sys.stderr)
    conn.close()


if __name__ == "__main__":
    main()
