#!/usr/bin/python3
"""bench/pipelined.py [JOBS] [ROUNDS]: one leased consumer, completing in turn
or on a second connection.

A consumer that claims a job (its own transaction) and then completes it
(another) waits for two commits per job.  graphile-worker's worker does not
wait for the second: it completes a job on another pooled connection while it
fetches the next, so the two commits overlap and share the disk's flushes.
This script measures what the same does for a queue consumer: in each round
it fills queue "pipelined" with JOBS jobs and drains them claiming one at a
time, completing each in turn ("in turn") and then on a second connection
while the next claim runs ("pipelined"), and prints jobs/s for both.

Connects with the PG* environment (PGHOST, PGPORT, PGDATABASE, PGUSER) to a
database with the extension installed; needs psycopg2 (python3-psycopg2).
"""
import queue as pyqueue
import sys
import threading
import time

import psycopg2

PAYLOAD = '{"user_id": 12345, "email": "someone@example.com", "template": "welcome", "locale": "en-GB", "n": 1}'
CLAIM = "SELECT id, attempt, payload::text FROM queue.claim('pipelined', 1)"
COMPLETE = "SELECT queue.complete(%s, %s)"


def connect():
    c = psycopg2.connect("")
    c.autocommit = True
    return c


def fill(cur, n):
    cur.execute("SELECT count(*) FROM queue.enqueue_batch('pipelined', array_fill(%s::jsonb, ARRAY[%s]))",
                (PAYLOAD, n))


def checkpoint(cur):
    """So that both drains pay for full-page images alike (needs pg_checkpoint or superuser)."""
    try:
        cur.execute("CHECKPOINT")
    except psycopg2.errors.InsufficientPrivilege:
        pass


def drain(cur, n, pipelined):
    """Claim and complete n jobs; returns jobs/s."""
    done = 0
    handoff = pyqueue.Queue(maxsize=2)
    completer = None
    if pipelined:
        def complete_jobs():
            c = connect().cursor()
            while True:
                job = handoff.get()
                if job is None:
                    return
                c.execute(COMPLETE, job)
        completer = threading.Thread(target=complete_jobs)
        completer.start()
    t0 = time.time()
    while done < n:
        cur.execute(CLAIM)
        row = cur.fetchone()
        if row is None:
            break
        if pipelined:
            handoff.put((row[0], row[1]))
        else:
            cur.execute(COMPLETE, (row[0], row[1]))
        done += 1
    if completer is not None:
        handoff.put(None)
        completer.join()
    if done < n:
        sys.exit("the queue ran dry after %d of %d jobs" % (done, n))
    return done / (time.time() - t0)


def main():
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 12000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    cur = connect().cursor()
    cur.execute("SELECT count(*) FROM queue.queue_config WHERE name = 'pipelined'")
    if cur.fetchone()[0] == 0:
        cur.execute("SELECT queue.create('pipelined')")
    cur.execute("SELECT queue.purge('pipelined')")
    for r in range(rounds):
        for pipelined in (False, True):
            fill(cur, jobs)
            checkpoint(cur)
            rate = drain(cur, jobs, pipelined)
            print("round %d, %-9s %7.0f jobs/s" % (r + 1, "pipelined" if pipelined else "in turn", rate), flush=True)


if __name__ == "__main__":
    main()
