#!/usr/bin/env python3
"""How late a LISTENing consumer hears of a job: bench/notify_late.py DSN QUEUE [N].

A listener LISTENs on the queue's channel; a producer enqueues one job at a
time (autocommit) and the time from just before the enqueue to the
notification's arrival is that job's lateness.  The listener then claims
and completes the job, as a consumer would, so that the next enqueue finds
the queue empty.  Prints the median and the maximum in ms.
"""
import select
import statistics
import sys
import time

import psycopg2


def main():
    dsn, queue = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    listener = psycopg2.connect(dsn)
    listener.autocommit = True
    producer = psycopg2.connect(dsn)
    producer.autocommit = True
    lc = listener.cursor()
    pc = producer.cursor()
    lc.execute('LISTEN "queue_%s"' % queue.replace('"', '""'))
    late = []
    for _ in range(n):
        t0 = time.monotonic()
        pc.execute("SELECT queue.enqueue(%s, '{}')", (queue,))
        while not listener.notifies:
            if select.select([listener], [], [], 5.0) == ([], [], []):
                sys.exit("no notification within 5 s")
            listener.poll()
        late.append((time.monotonic() - t0) * 1000)
        listener.notifies.clear()
        lc.execute("SELECT queue.complete(id) FROM queue.claim(%s)", (queue,))
        time.sleep(0.05)
    print("%.1f / %.1f" % (statistics.median(late), max(late)))


if __name__ == "__main__":
    main()
