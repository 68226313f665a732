--
-- manage.sql: queue.history, queue.reschedule, queue.cancel, queue.retry,
-- queue.purge and queue.tick.
--
-- Queues of this file are named man_*.  History events are printed
-- without their times; that the times are in order is checked instead.
-- A background worker may do tick()'s work at any moment, so the tests
-- check what tick() leaves behind, not the counts it returns.
--
\set SHOW_CONTEXT never

CREATE PROCEDURE pg_temp.try(sql text, id bigint DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    res text;
    st  text;
    msg text;
    det text;
    hnt text;
BEGIN
    EXECUTE sql INTO res USING id;
    RAISE NOTICE 'ok: %', coalesce(replace(res, id::text, '<id>'), res, 'NULL');
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                            det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
    msg := st || ': ' || coalesce(replace(msg, id::text, '<id>'), msg);
    IF det <> '' AND hnt <> '' THEN
        RAISE NOTICE '%', msg USING DETAIL = det, HINT = hnt;
    ELSIF det <> '' THEN
        RAISE NOTICE '%', msg USING DETAIL = det;
    ELSIF hnt <> '' THEN
        RAISE NOTICE '%', msg USING HINT = hnt;
    ELSE
        RAISE NOTICE '%', msg;
    END IF;
END
$$;

-- A job's history without times (reschedule details name a time, so only
-- their start is shown), and whether the times are in order.
CREATE FUNCTION pg_temp.hist(job bigint)
RETURNS TABLE (event text, attempt int, detail text)
LANGUAGE sql AS $$
    SELECT h.event, h.attempt,
           CASE WHEN h.detail LIKE 'run_at %' THEN 'run_at ...' ELSE h.detail END
      FROM queue.history(job) WITH ORDINALITY AS h(at, event, attempt, detail, n)
     ORDER BY h.n
$$;
CREATE FUNCTION pg_temp.hist_ordered(job bigint)
RETURNS boolean
LANGUAGE sql AS $$
    SELECT coalesce(bool_and(prev IS NULL OR prev <= at), true) AND bool_and(at IS NOT NULL)
      FROM (SELECT h.at, lag(h.at) OVER (ORDER BY h.n) AS prev
              FROM queue.history(job) WITH ORDINALITY AS h(at, event, attempt, detail, n)) s
$$;

--
-- history
--
SELECT queue.create('man_hist', max_attempts => 2, backoff_base => '0');
-- completed at the first attempt
SELECT queue.enqueue('man_hist', '{"n": "ok"}') AS h_ok \gset
-- the columns
SELECT * FROM queue.history(:h_ok) WHERE false;
SELECT * FROM pg_temp.hist(:h_ok);
SELECT payload FROM queue.claim('man_hist');
SELECT queue.complete(:h_ok);
SELECT * FROM pg_temp.hist(:h_ok);
SELECT pg_temp.hist_ordered(:h_ok);
-- failed once, then completed
SELECT queue.enqueue('man_hist', '{"n": "retried"}') AS h_retry \gset
SELECT count(*) FROM queue.claim('man_hist');
SELECT queue.fail(:h_retry, 'smtp timeout');
-- while it waits
SELECT * FROM pg_temp.hist(:h_retry);
SELECT count(*) FROM queue.claim('man_hist');
-- while it runs
SELECT * FROM pg_temp.hist(:h_retry);
SELECT queue.complete(:h_retry);
SELECT * FROM pg_temp.hist(:h_retry);
SELECT pg_temp.hist_ordered(:h_retry);
-- dead
SELECT queue.enqueue('man_hist', '{"n": "dead"}') AS h_dead \gset
SELECT count(*) FROM queue.claim('man_hist');
SELECT queue.fail(:h_dead, 'error one');
SELECT count(*) FROM queue.claim('man_hist');
SELECT queue.fail(:h_dead, 'error two');
SELECT * FROM pg_temp.hist(:h_dead);
SELECT pg_temp.hist_ordered(:h_dead);
-- cancelled before it ran
SELECT queue.enqueue('man_hist', '{"n": "cancelled"}') AS h_cancel \gset
SELECT queue.cancel(:h_cancel);
SELECT * FROM pg_temp.hist(:h_cancel);
-- released, rescheduled, then cancelled after a failure
SELECT queue.enqueue('man_hist', '{"n": "busy"}') AS h_busy \gset
SELECT count(*) FROM queue.claim('man_hist');
SELECT queue.release(:h_busy);
SELECT queue.reschedule(:h_busy, now() + interval '1 hour');
SELECT queue.reschedule(:h_busy, now());
SELECT count(*) FROM queue.claim('man_hist');
SELECT queue.fail(:h_busy, 'bad input');
SELECT queue.cancel(:h_busy);
SELECT * FROM pg_temp.hist(:h_busy);
SELECT pg_temp.hist_ordered(:h_busy);
-- a job that does not exist
CALL pg_temp.try('SELECT count(*) FROM queue.history($1)', :h_ok + 1000000000);
CALL pg_temp.try('SELECT count(*) FROM queue.history(999999)');
CALL pg_temp.try('SELECT count(*) FROM queue.history(NULL)');

--
-- reschedule
--
SELECT queue.create('man_resched');
SELECT queue.enqueue('man_resched', '{"n": 1}') AS rs1 \gset
SELECT queue.enqueue('man_resched', '{"n": 2}') AS rs2 \gset
SELECT queue.enqueue('man_resched', '{"n": 3}', delay => '1 day') AS rs3 \gset
-- a ready job to later: scheduled at that time, not claimable
SELECT now() + interval '2 hours' AS later \gset
SELECT queue.reschedule(:rs1, :'later');
SELECT state, run_at = :'later' AS at_later FROM queue.jobs WHERE id = :rs1;
SELECT payload FROM queue.claim('man_resched', 10);
-- a scheduled job to now: claimable
SELECT queue.reschedule(:rs3, now());
SELECT state FROM queue.jobs WHERE id = :rs3;
SELECT payload FROM queue.claim('man_resched', 10);
-- with a priority: run it before the others
SELECT queue.enqueue('man_resched', '{"n": 4}') AS rs4 \gset
SELECT queue.enqueue('man_resched', '{"n": 5}') AS rs5 \gset
SELECT queue.reschedule(:rs1, now(), priority => 7);
SELECT state, priority FROM queue.jobs WHERE id = :rs1;
SELECT payload FROM queue.claim('man_resched');
SELECT payload FROM queue.claim('man_resched', 10);
-- the priority is kept when none is given; a time before the job was
-- enqueued means as soon as possible
SELECT queue.enqueue('man_resched', '{"n": 6}', priority => 3, delay => '1 hour') AS rs6 \gset
SELECT queue.reschedule(:rs6, '2000-01-01');
SELECT state, priority, run_at = enqueued_at AS at_enqueued_at FROM queue.jobs WHERE id = :rs6;
-- a running job cannot be rescheduled, nor a dead or finished one
SELECT count(*) FROM queue.claim('man_resched');
CALL pg_temp.try('SELECT queue.reschedule($1, now())', :rs6);
SELECT queue.complete(:rs6);
CALL pg_temp.try('SELECT queue.reschedule($1, now())', :rs6);
CALL pg_temp.try('SELECT queue.reschedule($1, now())', :h_dead);
CALL pg_temp.try('SELECT queue.reschedule(999999, now())');
CALL pg_temp.try('SELECT queue.reschedule($1, NULL)', :rs1);
-- reschedule is transactional
SELECT queue.enqueue('man_resched', '{"n": 7}', delay => '1 hour') AS rs7 \gset
BEGIN;
SELECT queue.reschedule(:rs7, now());
ROLLBACK;
SELECT state FROM queue.jobs WHERE id = :rs7;
SELECT count(*) FROM queue.claim('man_resched');
-- run_at must be a finite time
SELECT run_at AS rs7_run_at FROM queue.jobs WHERE id = :rs7 \gset
CALL pg_temp.try($$SELECT queue.reschedule($1, 'infinity')$$, :rs7);
CALL pg_temp.try($$SELECT queue.reschedule($1, '-infinity')$$, :rs7);
SELECT state, run_at = :'rs7_run_at' AS run_at_unchanged FROM queue.jobs WHERE id = :rs7;
-- a waiting job (behind the head of its group) can be rescheduled: it
-- keeps waiting, with the new run_at and priority
SELECT queue.enqueue('man_resched', '{"n": 8}', group_key => 'g') AS rs8 \gset
SELECT queue.enqueue('man_resched', '{"n": 9}', group_key => 'g') AS rs9 \gset
SELECT payload, state FROM queue.jobs WHERE id IN (:rs8, :rs9) ORDER BY id;
SELECT now() + interval '3 hours' AS later3 \gset
SELECT queue.reschedule(:rs9, :'later3', priority => 4);
SELECT state, priority, run_at = :'later3' AS at_later3 FROM queue.jobs WHERE id = :rs9;
SELECT queue.reschedule(:rs9, now());
SELECT state, priority FROM queue.jobs WHERE id = :rs9;
SELECT payload FROM queue.claim('man_resched', 10);
-- once the head is done, it is the head: ready at the time it was given
SELECT queue.complete(:rs8);
SELECT state, priority FROM queue.jobs WHERE id = :rs9;
SELECT payload FROM queue.claim('man_resched', 10);
SELECT queue.complete(:rs9);
SELECT * FROM pg_temp.hist(:rs9);

--
-- cancel
--
SELECT queue.create('man_cancel', max_attempts => 1);
SELECT queue.enqueue('man_cancel', '{"n": "running"}') AS cn_running \gset
SELECT queue.enqueue('man_cancel', '{"n": "dead"}') AS cn_dead \gset
SELECT count(*) FROM queue.claim('man_cancel', 2);
SELECT queue.fail(:cn_dead, 'broken');
SELECT queue.enqueue('man_cancel', '{"n": "ready"}') AS cn_ready \gset
SELECT queue.enqueue('man_cancel', '{"n": "scheduled"}', delay => '1 hour') AS cn_sched \gset
-- ready, scheduled and dead jobs can be cancelled
SELECT queue.cancel(:cn_ready);
SELECT queue.cancel(:cn_sched);
SELECT queue.cancel(:cn_dead);
-- they leave queue.jobs for queue.archive, as cancelled
SELECT payload->>'n' AS job, state FROM queue.jobs WHERE queue = 'man_cancel' ORDER BY id;
SELECT payload->>'n' AS job, state, attempt, last_error, finished_at <= now() AS finished_at_ok
  FROM queue.archive WHERE queue = 'man_cancel' ORDER BY id;
-- a running job cannot, nor a finished one
CALL pg_temp.try('SELECT queue.cancel($1)', :cn_running);
CALL pg_temp.try('SELECT queue.cancel($1)', :cn_ready);
CALL pg_temp.try('SELECT queue.cancel(999999)');
CALL pg_temp.try('SELECT queue.cancel(NULL)');
SELECT payload->>'n' AS job, state FROM queue.jobs WHERE queue = 'man_cancel' ORDER BY id;
-- a cancelled job is not claimable, and not completable
SELECT count(*) FROM queue.claim('man_cancel', 10);
CALL pg_temp.try('SELECT queue.complete($1)', :cn_ready);
-- retention 0: cancelled jobs are not archived
SELECT queue.create('man_cancel0', retention => '0');
SELECT queue.enqueue('man_cancel0', '{}') AS c0 \gset
SELECT queue.cancel(:c0);
SELECT (SELECT count(*) FROM queue.jobs WHERE queue = 'man_cancel0') AS jobs,
       (SELECT count(*) FROM queue.archive WHERE queue = 'man_cancel0') AS archived;
-- cancel is transactional
SELECT queue.enqueue('man_cancel', '{"n": "kept"}') AS cn_kept \gset
BEGIN;
SELECT queue.cancel(:cn_kept);
ROLLBACK;
SELECT state FROM queue.jobs WHERE id = :cn_kept;

--
-- retry: a dead job gets a fresh set of attempts
--
SELECT queue.create('man_retry', max_attempts => 2, backoff_base => '0');
SELECT queue.enqueue('man_retry', '{"n": 1}', dedup_key => 'k1') AS rt1 \gset
SELECT count(*) FROM queue.claim('man_retry');
SELECT queue.fail(:rt1, 'first');
SELECT count(*) FROM queue.claim('man_retry');
SELECT queue.fail(:rt1, 'second');
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :rt1;
SELECT queue.retry(:rt1);
SELECT state, attempt, last_error, lease_until, run_at <= now() AS due FROM queue.jobs WHERE id = :rt1;
-- it can fail max_attempts times again
SELECT attempt FROM queue.claim('man_retry');
SELECT queue.fail(:rt1, 'third');
SELECT attempt FROM queue.claim('man_retry');
SELECT queue.fail(:rt1, 'fourth');
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :rt1;
SELECT * FROM pg_temp.hist(:rt1);
-- only dead jobs can be retried
SELECT queue.enqueue('man_retry', '{"n": 2}') AS rt2 \gset
CALL pg_temp.try('SELECT queue.retry($1)', :rt2);
SELECT count(*) FROM queue.claim('man_retry');
CALL pg_temp.try('SELECT queue.retry($1)', :rt2);
SELECT queue.complete(:rt2);
CALL pg_temp.try('SELECT queue.retry($1)', :rt2);
CALL pg_temp.try('SELECT queue.retry(999999)');
CALL pg_temp.try('SELECT queue.retry(NULL)');
-- a dead job whose dedup_key was taken meanwhile cannot be retried
SELECT queue.enqueue('man_retry', '{"n": 3}', dedup_key => 'k1') <> :rt1 AS new_job;
CALL pg_temp.try('SELECT queue.retry($1)', :rt1);
SELECT payload, state, dedup_key FROM queue.jobs WHERE queue = 'man_retry' ORDER BY id;

--
-- purge
--
SELECT queue.create('man_purge', max_attempts => 1);
SELECT count(*) FROM queue.enqueue_batch('man_purge',
    ARRAY['{"companyId": 3345, "n": 1}', '{"companyId": 3345, "n": 2}', '{"companyId": 3345, "n": 3}',
          '{"companyId": 12, "n": 4}', '{"n": 5}', '{"companyId": 3345, "n": 6, "extra": true}']::jsonb[]);
SELECT count(*) FROM queue.enqueue_batch('man_purge',
    ARRAY['{"companyId": 3345, "n": 7}', '{"companyId": 12, "n": 8}']::jsonb[], delay => '1 hour');
-- 1 runs, 2 dies
SELECT payload->>'n' AS job FROM queue.claim('man_purge', 2);
SELECT queue.fail(id, 'dead') FROM queue.jobs WHERE queue = 'man_purge' AND payload->>'n' = '2';
SELECT payload->>'n' AS job, state FROM queue.jobs WHERE queue = 'man_purge' ORDER BY id;
-- a filter: only jobs whose payload contains it, and not the running one
SELECT queue.purge('man_purge', '{"companyId": 3345}');
SELECT payload->>'n' AS job, state FROM queue.jobs WHERE queue = 'man_purge' ORDER BY id;
-- nothing matches
SELECT queue.purge('man_purge', '{"companyId": 99}');
-- purged jobs are not archived
SELECT count(*) AS archived FROM queue.archive WHERE queue = 'man_purge';
-- purge is transactional
BEGIN;
SELECT queue.purge('man_purge');
ROLLBACK;
SELECT count(*) AS jobs FROM queue.jobs WHERE queue = 'man_purge';
-- all: every job that is not running
SELECT queue.purge('man_purge');
SELECT payload->>'n' AS job, state FROM queue.jobs WHERE queue = 'man_purge' ORDER BY id;
SELECT queue.purge('man_purge', NULL);
-- the running job is still its consumer's
SELECT queue.complete(id) FROM queue.jobs WHERE queue = 'man_purge';
SELECT queue.purge('man_purge');
-- purge leaves other queues alone
SELECT queue.create('man_purge2');
SELECT queue.enqueue('man_purge2', '{"companyId": 3345}') > 0 AS enqueued;
SELECT queue.purge('man_purge', '{"companyId": 3345}');
SELECT count(*) FROM queue.jobs WHERE queue = 'man_purge2';
-- the filter must be an object
SELECT queue.purge('man_purge2', '[3345]');
SELECT queue.purge('man_purge2', '3345');
SELECT queue.purge('man_purge2', 'null');
SELECT count(*) FROM queue.jobs WHERE queue = 'man_purge2';
SELECT queue.purge('man_nope');
SELECT queue.purge(NULL);

--
-- tick: leases that ran out
--
SELECT queue.create('man_tick', max_attempts => 2);
SELECT queue.enqueue('man_tick', '{"n": 1}') AS tk1 \gset
SELECT payload, attempt FROM queue.claim('man_tick', lease => '1 millisecond');
SELECT pg_sleep(0.05);
SELECT count(*) > 0 AS ticked FROM queue.tick();
-- back to ready, the attempt counted
SELECT state, attempt, last_error, lease_until FROM queue.jobs WHERE id = :tk1;
SELECT * FROM pg_temp.hist(:tk1);
-- the consumer that lost it gets false / NULL for its stale token
SELECT attempt FROM queue.claim('man_tick', lease => '1 millisecond');
SELECT queue.complete(:tk1, 1);
SELECT queue.fail(:tk1, 'too late', attempt => 1) IS NULL AS stale;
-- the second expiry is the last attempt: dead
SELECT pg_sleep(0.05);
SELECT count(*) > 0 AS ticked FROM queue.tick();
SELECT state, attempt, last_error, lease_until FROM queue.jobs WHERE id = :tk1;
SELECT * FROM pg_temp.hist(:tk1);
SELECT pg_temp.hist_ordered(:tk1);
-- and its consumer can no longer complete it
SELECT queue.complete(:tk1, 2);
-- leases that have not run out are left alone
SELECT queue.enqueue('man_tick', '{"n": 2}') AS tk2 \gset
SELECT attempt FROM queue.claim('man_tick', lease => '1 hour');
SELECT count(*) > 0 AS ticked FROM queue.tick();
SELECT state, attempt FROM queue.jobs WHERE id = :tk2;
-- due scheduled jobs are claimable after a tick
SELECT queue.enqueue('man_tick', '{"n": 3}', delay => '10 milliseconds') AS tk3 \gset
SELECT pg_sleep(0.05);
SELECT count(*) > 0 AS ticked FROM queue.tick();
SELECT state FROM queue.jobs WHERE id = :tk3;
SELECT payload FROM queue.claim('man_tick');

--
-- tick: archived jobs past the queue's retention are deleted
--
SELECT queue.create('man_retention', retention => '1 millisecond');
SELECT queue.create('man_retention_day', retention => '1 day');
SELECT queue.enqueue('man_retention', '{"n": 1}') AS rt_a \gset
SELECT queue.enqueue('man_retention', '{"n": 2}') AS rt_b \gset
SELECT queue.enqueue('man_retention_day', '{"n": 3}') AS rt_c \gset
SELECT count(*) FROM queue.claim('man_retention');
SELECT count(*) FROM queue.claim('man_retention_day');
BEGIN;
SELECT queue.complete(:rt_a);
SELECT queue.cancel(:rt_b);
SELECT queue.complete(:rt_c);
SELECT queue, payload, state FROM queue.archive WHERE queue LIKE 'man\_retention%' ORDER BY queue, id;
COMMIT;
SELECT pg_sleep(0.05);
-- the first tick turns the ring: the segment holding a and b stops taking
-- jobs; the next one, retention later, empties it
SELECT queue, deleted FROM queue.tick() WHERE queue LIKE 'man\_retention%' ORDER BY 1;
SELECT queue, payload, state FROM queue.archive WHERE queue LIKE 'man\_retention%' ORDER BY queue, id;
SELECT pg_sleep(0.05);
SELECT queue, deleted FROM queue.tick() WHERE queue LIKE 'man\_retention%' ORDER BY 1;
SELECT queue, payload, state FROM queue.archive WHERE queue LIKE 'man\_retention%' ORDER BY queue, id;
CALL pg_temp.try('SELECT count(*) FROM queue.history($1)', :rt_a);
SELECT count(*) FROM pg_temp.hist(:rt_c);
-- tick returns one row per queue
SELECT count(*) = (SELECT count(*) FROM queue.queues) AS one_row_per_queue FROM queue.tick();
SELECT queue FROM queue.tick() WHERE queue LIKE 'man\_%' ORDER BY queue;
-- the archive is searched by id (history) through a btree in every
-- segment: BRIN would read every page added since the last vacuum
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT state FROM queue.a_man_retention_day WHERE id = 1;
RESET enable_seqscan;
RESET enable_bitmapscan;

--
-- the archive is a ring of segments: finished jobs go to the current one,
-- which is left for the next after retention / 3, and a segment is emptied
-- whole once it stopped taking jobs longer than retention ago
--
SELECT queue.create('man_ring', retention => '1 hour');
SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'queue.a_man_ring'::regclass ORDER BY 1;
SELECT queue.enqueue('man_ring', '{"n": 1}') AS rg1 \gset
SELECT queue.complete(id) FROM queue.claim('man_ring');
SELECT tableoid::regclass AS segment, payload, state FROM queue.a_man_ring ORDER BY id;
-- taking jobs for less than 20 minutes: the ring stays
SELECT deleted FROM queue.tick() WHERE queue = 'man_ring';
SELECT archive_seg FROM queue.queue_config WHERE name = 'man_ring';
-- for 21: it turns, and nothing is removed
UPDATE queue.queue_config SET archive_since[1] = now() - interval '21 minutes' WHERE name = 'man_ring';
SELECT deleted FROM queue.tick() WHERE queue = 'man_ring';
SELECT archive_seg, archive_since[2] IS NOT NULL AS started FROM queue.queue_config WHERE name = 'man_ring';
-- jobs finished since go to segment 1: completed in the claim's
-- transaction (C), completed after it (C), cancelled (SQL)
SELECT queue.enqueue('man_ring', '{"n": 2}') AS rg2 \gset
SELECT queue.enqueue('man_ring', '{"n": 3}') AS rg3 \gset
SELECT queue.enqueue('man_ring', '{"n": 4}') AS rg4 \gset
BEGIN;
SELECT queue.complete(id) FROM queue.claim('man_ring');
COMMIT;
SELECT queue.complete(id) FROM queue.claim('man_ring');
SELECT queue.cancel(:rg4);
SELECT tableoid::regclass AS segment, payload, state FROM queue.a_man_ring ORDER BY id;
-- segment 0 stopped taking jobs when segment 1 began: 59 minutes ago, it
-- is kept (and segment 1, after 59 minutes, is left for segment 2);
-- 61 minutes ago, it is emptied
UPDATE queue.queue_config SET archive_since[2] = now() - interval '59 minutes' WHERE name = 'man_ring';
SELECT deleted FROM queue.tick() WHERE queue = 'man_ring';
SELECT archive_seg FROM queue.queue_config WHERE name = 'man_ring';
UPDATE queue.queue_config SET archive_since[2] = now() - interval '61 minutes' WHERE name = 'man_ring';
SELECT deleted FROM queue.tick() WHERE queue = 'man_ring';
SELECT tableoid::regclass AS segment, payload, state FROM queue.a_man_ring ORDER BY id;
-- history still finds archived jobs in any segment
SELECT count(*) > 0 AS found FROM queue.history(:rg3);
-- retention 0: the current segment is left at once and emptied at the
-- next tick; then nothing turns, and nothing is truncated again
SELECT queue.enqueue('man_ring', '{"n": 5}') AS rg5 \gset
SELECT queue.complete(id) FROM queue.claim('man_ring');
SELECT queue.alter('man_ring', retention => '0');
SELECT deleted FROM queue.tick() WHERE queue = 'man_ring';
SELECT pg_sleep(0.01);
SELECT deleted FROM queue.tick() WHERE queue = 'man_ring';
SELECT count(*) AS archived FROM queue.a_man_ring;
SELECT archive_seg FROM queue.queue_config WHERE name = 'man_ring';
SELECT string_agg(relfilenode::text, ',' ORDER BY relname) AS before
  FROM pg_class WHERE relname LIKE 'a\_man\_ring$_' \gset
SELECT deleted FROM queue.tick() WHERE queue = 'man_ring';
SELECT string_agg(relfilenode::text, ',' ORDER BY relname) = :'before' AS untouched
  FROM pg_class WHERE relname LIKE 'a\_man\_ring$_';
-- a column cannot be added to one queue's archive
ALTER TABLE queue.a_man_ring ADD COLUMN note text;
SELECT queue.drop('man_ring');
