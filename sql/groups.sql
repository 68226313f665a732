--
-- groups.sql: ordered groups (group_key, group_retry) and the per-queue
-- cap on running jobs (max_running).
--
-- Queues of this file are named grp_*.  Ids embed the queue's number,
-- which depends on the other tests in the database: they are kept in psql
-- variables and only compared; jobs are printed by their payload.
-- A background worker may do tick()'s work at any moment, so the tests
-- check what tick() leaves behind, not the counts it returns.
--
\set SHOW_CONTEXT never

-- Every unfinished or dead job of a queue, in id (enqueue) order.
CREATE FUNCTION pg_temp.jobs(q text)
RETURNS TABLE (n text, g text, state text, attempt int)
LANGUAGE sql AS $$
    SELECT payload->>'n', group_key, state, attempt FROM queue.jobs WHERE queue = q ORDER BY id
$$;

-- Claim up to max_jobs jobs and complete them, until a claim returns
-- nothing; one row per claim with what it got, in claim order.
CREATE FUNCTION pg_temp.rounds(q text, max_jobs int)
RETURNS TABLE (round int, got text)
LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
BEGIN
    round := 0;
    LOOP
        SELECT array_agg(c.id ORDER BY c.o), string_agg(c.payload->>'n', ' ' ORDER BY c.o)
          INTO ids, got
          FROM queue.claim(q, max_jobs) WITH ORDINALITY AS c(id, payload, attempt, group_key,
                                                             enqueued_at, lease_until, o);
        EXIT WHEN ids IS NULL;
        PERFORM queue.complete(ids);
        round := round + 1;
        RETURN NEXT;
    END LOOP;
END
$$;

-- queue.tick() until no job of the queue is running (the background
-- worker may be returning them at the same moment, holding their rows).
CREATE FUNCTION pg_temp.expire(q text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..500 LOOP
        PERFORM queue.tick();
        IF NOT EXISTS (SELECT 1 FROM queue.jobs j WHERE j.queue = q AND j.state = 'running') THEN
            RETURN true;
        END IF;
        PERFORM pg_sleep(0.01);
    END LOOP;
    RETURN false;
END
$$;

--
-- Order within a group: one at a time, in enqueue order, even when claims
-- take many jobs; groups and ungrouped jobs interleave.
--
SELECT queue.create('grp_order');
SELECT queue.enqueue('grp_order', '{"n": "a1"}', group_key => 'a') AS id \gset
SELECT queue.enqueue('grp_order', '{"n": "a2"}', group_key => 'a') AS id \gset
SELECT queue.enqueue('grp_order', '{"n": "b1"}', group_key => 'b') AS id \gset
SELECT queue.enqueue('grp_order', '{"n": "u1"}') AS id \gset
SELECT queue.enqueue('grp_order', '{"n": "a3"}', group_key => 'a') AS id \gset
SELECT queue.enqueue('grp_order', '{"n": "b2"}', group_key => 'b') AS id \gset
SELECT queue.enqueue('grp_order', '{"n": "u2"}') AS id \gset
SELECT queue.enqueue('grp_order', '{"n": "a4"}', group_key => 'a') AS id \gset
SELECT queue.enqueue('grp_order', '{"n": "a5"}', group_key => 'a') AS id \gset
-- only the heads (a1, b1) and ungrouped jobs are claimable; the rest wait
SELECT * FROM pg_temp.jobs('grp_order');
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_order';
-- a claim of 10 gets the two heads and the ungrouped jobs, in enqueue order
SELECT payload->>'n' AS n, group_key FROM queue.claim('grp_order', 10);
SELECT * FROM pg_temp.jobs('grp_order');
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_order';
SELECT count(*) FROM queue.claim('grp_order', 10);
DO $$ BEGIN PERFORM queue.complete(array_agg(id)) FROM queue.jobs WHERE queue = 'grp_order' AND state = 'running'; END $$;
SELECT * FROM pg_temp.jobs('grp_order');
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_order';
SELECT queue.drop('grp_order');

-- The same with claims that show what they got.
SELECT queue.create('grp_order2');
SELECT queue.enqueue('grp_order2', '{"n": "a1"}', group_key => 'a') AS id \gset
SELECT queue.enqueue('grp_order2', '{"n": "a2"}', group_key => 'a') AS id \gset
SELECT queue.enqueue('grp_order2', '{"n": "b1"}', group_key => 'b') AS id \gset
SELECT queue.enqueue('grp_order2', '{"n": "u1"}') AS id \gset
SELECT queue.enqueue('grp_order2', '{"n": "a3"}', group_key => 'a') AS id \gset
SELECT queue.enqueue('grp_order2', '{"n": "b2"}', group_key => 'b') AS id \gset
SELECT queue.enqueue('grp_order2', '{"n": "u2"}') AS id \gset
SELECT queue.enqueue('grp_order2', '{"n": "a4"}', group_key => 'a') AS id \gset
SELECT queue.enqueue('grp_order2', '{"n": "a5"}', group_key => 'a') AS id \gset
SELECT queue.enqueue('grp_order2', '{"n": "c1"}', group_key => 'c') AS id \gset
-- each claim of 10 gets at most one job of each group, the oldest
SELECT * FROM pg_temp.rounds('grp_order2', 10);
SELECT count(*) AS left_over FROM queue.jobs WHERE queue = 'grp_order2';
SELECT queue.drop('grp_order2');

-- One statement per claim and per complete: group a in order, a2 only once
-- a1 is done, never two of a at a time.
SELECT queue.create('grp_steps');
SELECT queue.enqueue('grp_steps', '{"n": "a1"}', group_key => 'a') AS a1 \gset
SELECT queue.enqueue('grp_steps', '{"n": "a2"}', group_key => 'a') AS a2 \gset
SELECT queue.enqueue('grp_steps', '{"n": "a3"}', group_key => 'a') AS a3 \gset
SELECT queue.enqueue('grp_steps', '{"n": "u1"}') AS u1 \gset
SELECT payload->>'n' AS n, group_key, attempt FROM queue.claim('grp_steps', 10);
SELECT payload->>'n' AS n FROM queue.claim('grp_steps', 10);
SELECT * FROM pg_temp.jobs('grp_steps');
-- complete -> the next job of the group is ready
SELECT queue.complete(:a1);
SELECT * FROM pg_temp.jobs('grp_steps');
SELECT payload->>'n' AS n, id = :a2 AS is_a2 FROM queue.claim('grp_steps', 10);
SELECT payload->>'n' AS n FROM queue.claim('grp_steps', 10);
SELECT queue.complete(ARRAY[:a2, :u1]);
SELECT * FROM pg_temp.jobs('grp_steps');
SELECT payload->>'n' AS n, id = :a3 AS is_a3 FROM queue.claim('grp_steps', 10);
SELECT queue.complete(:a3);
-- the group is empty: a new job of it is ready at once
SELECT queue.enqueue('grp_steps', '{"n": "a4"}', group_key => 'a') AS a4 \gset
SELECT * FROM pg_temp.jobs('grp_steps');
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_steps';
SELECT queue.drop('grp_steps');

--
-- A failed job that will be retried keeps its group blocked (the default,
-- group_retry 'block') until it succeeds.
--
SELECT queue.create('grp_fail', max_attempts => 3, backoff_base => '0', backoff_max => '0');
SELECT group_retry FROM queue.queues WHERE queue = 'grp_fail';
SELECT queue.enqueue('grp_fail', '{"n": "g1"}', group_key => 'g') AS g1 \gset
SELECT queue.enqueue('grp_fail', '{"n": "g2"}', group_key => 'g') AS g2 \gset
SELECT queue.enqueue('grp_fail', '{"n": "h1"}', group_key => 'h') AS h1 \gset
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_fail', 10);
SELECT queue.fail(:g1, 'boom 1');
SELECT queue.complete(:h1);
SELECT * FROM pg_temp.jobs('grp_fail');
-- g1 runs again, not g2
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_fail', 10);
SELECT queue.fail(:g1, 'boom 2');
SELECT * FROM pg_temp.jobs('grp_fail');
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_fail', 10);
SELECT count(*) FROM queue.claim('grp_fail', 10);
-- success on the third attempt lets g2 go
SELECT queue.complete(:g1);
SELECT * FROM pg_temp.jobs('grp_fail');
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_fail', 10);
-- a retry with backoff: the head is scheduled, and the group still waits
SELECT queue.fail(:g2, 'later', retry_in => '1 hour');
SELECT queue.enqueue('grp_fail', '{"n": "g3"}', group_key => 'g') AS g3 \gset
SELECT * FROM pg_temp.jobs('grp_fail');
SELECT count(*) FROM queue.claim('grp_fail', 10);
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_fail';
-- run it now: g2 (not g3) is claimed
SELECT queue.reschedule(:g2, now());
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_fail', 10);
SELECT queue.complete(:g2);
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_fail', 10);
SELECT queue.complete(:g3);
SELECT count(*) AS left_over FROM queue.jobs WHERE queue = 'grp_fail';
SELECT queue.drop('grp_fail');

--
-- Failing on the last attempt: the job is dead and the group goes on.
--
SELECT queue.create('grp_die', max_attempts => 2, backoff_base => '0', backoff_max => '0');
SELECT queue.enqueue('grp_die', '{"n": "g1"}', group_key => 'g') AS g1 \gset
SELECT queue.enqueue('grp_die', '{"n": "g2"}', group_key => 'g') AS g2 \gset
SELECT queue.enqueue('grp_die', '{"n": "g3"}', group_key => 'g') AS g3 \gset
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_die', 10);
SELECT queue.fail(:g1, 'first');
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_die', 10);
SELECT queue.fail(:g1, 'second');
SELECT * FROM pg_temp.jobs('grp_die');
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_die';
SELECT payload->>'n' AS n, id = :g2 AS is_g2, attempt FROM queue.claim('grp_die', 10);
-- g2 dies too (fail, claim again, fail): g3 goes on
SELECT queue.fail(:g2, 'x', retry_in => '0');
SELECT queue.fail(:g2, 'y') FROM queue.claim('grp_die');
SELECT * FROM pg_temp.jobs('grp_die');
SELECT payload->>'n' AS n FROM queue.claim('grp_die');
SELECT queue.complete(:g3);
-- dead jobs do not block their group: a new job of it is ready at once
SELECT queue.enqueue('grp_die', '{"n": "g4"}', group_key => 'g') AS g4 \gset
SELECT * FROM pg_temp.jobs('grp_die');
--
-- retry() of a dead grouped job: 'waiting' while its group has other
-- unfinished jobs (behind them), 'ready' when it has none.
--
SELECT queue.retry(:g1);
SELECT * FROM pg_temp.jobs('grp_die');
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_die';
SELECT payload->>'n' AS n FROM queue.claim('grp_die', 10);
SELECT queue.complete(:g4);
SELECT * FROM pg_temp.jobs('grp_die');
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_die', 10);
SELECT queue.complete(:g1);
SELECT queue.retry(:g2);
SELECT * FROM pg_temp.jobs('grp_die');
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_die', 10);
SELECT queue.complete(:g2);
SELECT count(*) AS left_over FROM queue.jobs WHERE queue = 'grp_die';
SELECT queue.drop('grp_die');

--
-- Lease expiry (tick): the head is returned and keeps its group blocked;
-- on the last attempt it is dead and the group goes on.
--
SELECT queue.create('grp_lease', max_attempts => 2);
SELECT queue.enqueue('grp_lease', '{"n": "g1"}', group_key => 'g') AS g1 \gset
SELECT queue.enqueue('grp_lease', '{"n": "g2"}', group_key => 'g') AS g2 \gset
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_lease', 10, lease => '1 millisecond');
SELECT pg_sleep(0.05);
SELECT pg_temp.expire('grp_lease') AS returned;
SELECT payload->>'n' AS n, group_key, state, attempt, last_error FROM queue.jobs WHERE queue = 'grp_lease' ORDER BY id;
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_lease', 10, lease => '1 millisecond');
SELECT pg_sleep(0.05);
SELECT pg_temp.expire('grp_lease') AS returned;
SELECT payload->>'n' AS n, group_key, state, attempt, last_error FROM queue.jobs WHERE queue = 'grp_lease' ORDER BY id;
SELECT payload->>'n' AS n, id = :g2 AS is_g2, attempt FROM queue.claim('grp_lease', 10);
SELECT queue.complete(:g2);
SELECT queue.drop('grp_lease');

--
-- release() gives the job back and it stays the head.
--
SELECT queue.create('grp_release');
SELECT queue.enqueue('grp_release', '{"n": "g1"}', group_key => 'g') AS g1 \gset
SELECT queue.enqueue('grp_release', '{"n": "g2"}', group_key => 'g') AS g2 \gset
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_release', 10);
SELECT queue.release(:g1);
SELECT * FROM pg_temp.jobs('grp_release');
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_release', 10);
-- released to a later time: scheduled, and the group still waits
SELECT queue.release(:g1, run_at => now() + interval '1 hour');
SELECT * FROM pg_temp.jobs('grp_release');
SELECT count(*) FROM queue.claim('grp_release', 10);
SELECT queue.drop('grp_release');

--
-- cancel: of the head (the next job becomes the head), of a waiting job
-- (nothing else changes), of a waiting job behind a running head.
--
SELECT queue.create('grp_cancel');
SELECT queue.enqueue('grp_cancel', '{"n": "g1"}', group_key => 'g') AS g1 \gset
SELECT queue.enqueue('grp_cancel', '{"n": "g2"}', group_key => 'g') AS g2 \gset
SELECT queue.enqueue('grp_cancel', '{"n": "g3"}', group_key => 'g') AS g3 \gset
SELECT queue.enqueue('grp_cancel', '{"n": "g4"}', group_key => 'g') AS g4 \gset
SELECT queue.enqueue('grp_cancel', '{"n": "g5"}', group_key => 'g') AS g5 \gset
SELECT queue.cancel(:g1);
SELECT * FROM pg_temp.jobs('grp_cancel');
SELECT queue.cancel(:g3);
SELECT * FROM pg_temp.jobs('grp_cancel');
SELECT payload->>'n' AS n FROM queue.claim('grp_cancel', 10);
SELECT queue.cancel(:g4);
SELECT * FROM pg_temp.jobs('grp_cancel');
SELECT queue.complete(:g2);
SELECT * FROM pg_temp.jobs('grp_cancel');
SELECT payload->>'n' AS n FROM queue.claim('grp_cancel', 10);
SELECT queue.complete(:g5);
SELECT payload->>'n' AS n, state FROM queue.archive WHERE queue = 'grp_cancel' ORDER BY id;
-- a scheduled head that is cancelled lets the next job go too
SELECT queue.enqueue('grp_cancel', '{"n": "g6"}', group_key => 'g', delay => '1 hour') AS g6 \gset
SELECT queue.enqueue('grp_cancel', '{"n": "g7"}', group_key => 'g') AS g7 \gset
SELECT * FROM pg_temp.jobs('grp_cancel');
SELECT queue.cancel(:g6);
SELECT payload->>'n' AS n FROM queue.claim('grp_cancel', 10);
SELECT queue.complete(:g7);
SELECT queue.drop('grp_cancel');

--
-- purge with a filter that removes the head: the next surviving job of
-- the group becomes the head; a running head is not purged.
--
SELECT queue.create('grp_purge');
SELECT queue.enqueue('grp_purge', '{"n": "g1", "bad": true}', group_key => 'g') AS id \gset
SELECT queue.enqueue('grp_purge', '{"n": "g2", "bad": true}', group_key => 'g') AS id \gset
SELECT queue.enqueue('grp_purge', '{"n": "g3"}', group_key => 'g') AS id \gset
SELECT queue.enqueue('grp_purge', '{"n": "g4"}', group_key => 'g') AS id \gset
SELECT queue.enqueue('grp_purge', '{"n": "h1", "bad": true}', group_key => 'h') AS id \gset
SELECT queue.enqueue('grp_purge', '{"n": "h2"}', group_key => 'h') AS id \gset
SELECT queue.enqueue('grp_purge', '{"n": "k1"}', group_key => 'k') AS id \gset
SELECT queue.enqueue('grp_purge', '{"n": "k2", "bad": true}', group_key => 'k') AS id \gset
SELECT queue.purge('grp_purge', '{"bad": true}');
SELECT * FROM pg_temp.jobs('grp_purge');
SELECT payload->>'n' AS n FROM queue.claim('grp_purge', 10);
-- with the heads running, purging everything leaves the heads alone
SELECT queue.purge('grp_purge');
SELECT * FROM pg_temp.jobs('grp_purge');
DO $$ BEGIN PERFORM queue.complete(array_agg(id)) FROM queue.jobs WHERE queue = 'grp_purge' AND state = 'running'; END $$;
SELECT count(*) AS left_over FROM queue.jobs WHERE queue = 'grp_purge';
SELECT queue.drop('grp_purge');

--
-- group_retry => 'requeue': a job to be retried goes behind the rest of
-- its group and the next job runs.
--
SELECT queue.create('grp_requeue', max_attempts => 3, backoff_base => '0', backoff_max => '0',
                    group_retry => 'requeue');
SELECT group_retry FROM queue.queues WHERE queue = 'grp_requeue';
SELECT queue.enqueue('grp_requeue', '{"n": "g1"}', group_key => 'g') AS g1 \gset
SELECT queue.enqueue('grp_requeue', '{"n": "g2"}', group_key => 'g') AS g2 \gset
SELECT queue.enqueue('grp_requeue', '{"n": "g3"}', group_key => 'g') AS g3 \gset
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_requeue', 10);
SELECT queue.fail(:g1, 'boom');
SELECT * FROM pg_temp.jobs('grp_requeue');
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_requeue';
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_requeue', 10);
SELECT queue.complete(:g2);
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_requeue', 10);
SELECT queue.complete(:g3);
-- g1 comes back after the rest of its group
SELECT * FROM pg_temp.jobs('grp_requeue');
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_requeue', 10);
-- alone in its group, a requeued job is its head again at once ...
SELECT queue.fail(:g1, 'again');
SELECT * FROM pg_temp.jobs('grp_requeue');
-- ... on the last attempt it dies and the group goes on
SELECT queue.enqueue('grp_requeue', '{"n": "g4"}', group_key => 'g') AS g4 \gset
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_requeue', 10);
SELECT queue.fail(:g1, 'last');
SELECT * FROM pg_temp.jobs('grp_requeue');
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_requeue', 10);
-- requeued with a backoff: when it becomes the head again, it is scheduled
SELECT queue.enqueue('grp_requeue', '{"n": "g5"}', group_key => 'g') AS g5 \gset
SELECT queue.fail(:g4, 'later', retry_in => '1 hour');
SELECT * FROM pg_temp.jobs('grp_requeue');
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_requeue', 10);
SELECT queue.complete(:g5);
SELECT * FROM pg_temp.jobs('grp_requeue');
SELECT count(*) FROM queue.claim('grp_requeue', 10);
-- switched back to 'block' by alter
SELECT queue.alter('grp_requeue', group_retry => 'block');
SELECT group_retry FROM queue.queues WHERE queue = 'grp_requeue';
SELECT queue.reschedule(:g4, now());
SELECT queue.enqueue('grp_requeue', '{"n": "g6"}', group_key => 'g') AS g6 \gset
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_requeue', 10);
SELECT queue.fail(:g4, 'blocks now');
SELECT * FROM pg_temp.jobs('grp_requeue');
SELECT queue.drop('grp_requeue');

--
-- A scheduled head blocks its group until it runs; a waiting job with a
-- future run_at becomes a scheduled head.
--
SELECT queue.create('grp_sched');
SELECT queue.enqueue('grp_sched', '{"n": "g1"}', group_key => 'g', delay => '1 second') AS g1 \gset
SELECT queue.enqueue('grp_sched', '{"n": "g2"}', group_key => 'g') AS g2 \gset
SELECT queue.enqueue('grp_sched', '{"n": "g3"}', group_key => 'g', delay => '1 hour') AS g3 \gset
SELECT queue.enqueue('grp_sched', '{"n": "g4"}', group_key => 'g') AS g4 \gset
SELECT * FROM pg_temp.jobs('grp_sched');
SELECT count(*) FROM queue.claim('grp_sched', 10);
SELECT pg_sleep(1.1);
SELECT payload->>'n' AS n FROM queue.claim('grp_sched', 10);
SELECT queue.complete(:g1);
SELECT payload->>'n' AS n FROM queue.claim('grp_sched', 10);
SELECT queue.complete(:g2);
-- g3 is the head now, but not due: it is scheduled and g4 still waits
SELECT * FROM pg_temp.jobs('grp_sched');
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_sched';
SELECT count(*) FROM queue.claim('grp_sched', 10);
-- rescheduling a waiting job keeps it waiting
SELECT queue.reschedule(:g4, now());
SELECT * FROM pg_temp.jobs('grp_sched');
SELECT queue.reschedule(:g3, now());
SELECT payload->>'n' AS n FROM queue.claim('grp_sched', 10);
SELECT queue.complete(:g3);
SELECT payload->>'n' AS n FROM queue.claim('grp_sched', 10);
SELECT queue.complete(:g4);
SELECT queue.drop('grp_sched');

-- Rescheduling a waiting job does not change its place in its group: the
-- group still runs in enqueue order.
SELECT queue.create('grp_resched');
SELECT queue.enqueue('grp_resched', '{"n": "g1"}', group_key => 'g') AS g1 \gset
SELECT queue.enqueue('grp_resched', '{"n": "g2"}', group_key => 'g') AS g2 \gset
SELECT queue.enqueue('grp_resched', '{"n": "g3"}', group_key => 'g') AS g3 \gset
SELECT queue.enqueue('grp_resched', '{"n": "g4"}', group_key => 'g') AS g4 \gset
SELECT payload->>'n' AS n FROM queue.claim('grp_resched', 10);
SELECT queue.reschedule(:g2, now());
SELECT queue.reschedule(:g3, now() + interval '1 hour');
SELECT * FROM pg_temp.jobs('grp_resched');
SELECT queue.complete(:g1);
SELECT * FROM pg_temp.jobs('grp_resched');
SELECT payload->>'n' AS n FROM queue.claim('grp_resched', 10);
SELECT queue.complete(:g2);
-- g3 is the head now, and due in an hour: g4 waits for it
SELECT * FROM pg_temp.jobs('grp_resched');
SELECT count(*) FROM queue.claim('grp_resched', 10);
SELECT queue.drop('grp_resched');

--
-- enqueue_batch with a group_key: the first job is the head, the rest
-- wait; into a busy group, all of them wait.
--
SELECT queue.create('grp_batch');
SELECT count(*) FROM queue.enqueue_batch('grp_batch',
    ARRAY['{"n": "b1"}', '{"n": "b2"}', '{"n": "b3"}']::jsonb[], group_key => 'b');
SELECT count(*) FROM queue.enqueue_batch('grp_batch',
    ARRAY['{"n": "b4"}', '{"n": "b5"}']::jsonb[], group_key => 'b');
SELECT count(*) FROM queue.enqueue_batch('grp_batch',
    ARRAY['{"n": "u1"}', '{"n": "u2"}']::jsonb[]);
SELECT count(*) FROM queue.enqueue_batch('grp_batch',
    ARRAY['{"n": "c1"}', '{"n": "c2"}']::jsonb[], group_key => 'c', delay => '1 hour');
SELECT * FROM pg_temp.jobs('grp_batch');
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_batch';
SELECT * FROM pg_temp.rounds('grp_batch', 10);
SELECT * FROM pg_temp.jobs('grp_batch');
SELECT queue.drop('grp_batch');

--
-- Priorities apply between the heads of groups; a waiting job's priority
-- does not let it pass its group's head.
--
SELECT queue.create('grp_prio');
SELECT queue.enqueue('grp_prio', '{"n": "a1"}', group_key => 'a', priority => 0) AS id \gset
SELECT queue.enqueue('grp_prio', '{"n": "a2"}', group_key => 'a', priority => 10) AS id \gset
SELECT queue.enqueue('grp_prio', '{"n": "b1"}', group_key => 'b', priority => 5) AS id \gset
SELECT queue.enqueue('grp_prio', '{"n": "b2"}', group_key => 'b', priority => 1) AS id \gset
SELECT queue.enqueue('grp_prio', '{"n": "c1"}', group_key => 'c', priority => 2) AS id \gset
SELECT queue.enqueue('grp_prio', '{"n": "u1"}', priority => 3) AS id \gset
SELECT * FROM pg_temp.rounds('grp_prio', 1);
SELECT queue.enqueue('grp_prio', '{"n": "a1"}', group_key => 'a', priority => 0) AS id \gset
SELECT queue.enqueue('grp_prio', '{"n": "a2"}', group_key => 'a', priority => 10) AS id \gset
SELECT queue.enqueue('grp_prio', '{"n": "b1"}', group_key => 'b', priority => 5) AS id \gset
SELECT queue.enqueue('grp_prio', '{"n": "b2"}', group_key => 'b', priority => 1) AS id \gset
SELECT queue.enqueue('grp_prio', '{"n": "c1"}', group_key => 'c', priority => 2) AS id \gset
SELECT queue.enqueue('grp_prio', '{"n": "u1"}', priority => 3) AS id \gset
SELECT * FROM pg_temp.rounds('grp_prio', 10);
SELECT queue.drop('grp_prio');

--
-- dedup_key and group_key together.
--
SELECT queue.create('grp_dedup');
SELECT queue.enqueue('grp_dedup', '{"n": "g1"}', group_key => 'g', dedup_key => 'd1') AS g1 \gset
SELECT queue.enqueue('grp_dedup', '{"n": "g2"}', group_key => 'g', dedup_key => 'd2') AS g2 \gset
-- the same dedup_key again: the existing job, whether head or waiting
SELECT queue.enqueue('grp_dedup', '{"n": "again"}', group_key => 'g', dedup_key => 'd1') = :g1 AS same_g1;
SELECT queue.enqueue('grp_dedup', '{"n": "again"}', group_key => 'g', dedup_key => 'd2') = :g2 AS same_g2;
SELECT queue.enqueue('grp_dedup', '{"n": "again"}', group_key => 'other', dedup_key => 'd2') = :g2 AS same_g2;
SELECT * FROM pg_temp.jobs('grp_dedup');
SELECT payload->>'n' AS n FROM queue.claim('grp_dedup', 10);
SELECT queue.complete(:g1);
-- d1 is free again: a new job with it waits behind g2
SELECT queue.enqueue('grp_dedup', '{"n": "g3"}', group_key => 'g', dedup_key => 'd1') = :g1 AS same_g1;
SELECT * FROM pg_temp.jobs('grp_dedup');
SELECT * FROM pg_temp.rounds('grp_dedup', 10);
SELECT queue.drop('grp_dedup');

--
-- Fairness: a group with 100,000 ready jobs does not hold up 1,000 other
-- groups enqueued after it.  Claiming one job at a time (and completing
-- it), all 1,000 small jobs are claimed within 1,001 claims: the big
-- group's next job goes behind them when its head is done.
--
SELECT queue.create('grp_fair');
SELECT count(*) FROM queue.enqueue_batch('grp_fair',
    ARRAY(SELECT jsonb_build_object('n', 'big' || i) FROM generate_series(1, 100000) i), group_key => 'big');
SELECT count(*) FROM (
    SELECT queue.enqueue('grp_fair', jsonb_build_object('n', 'small' || i, 'small', true), group_key => 'g' || i)
      FROM generate_series(1, 1000) i) e;
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_fair';
CREATE TEMP TABLE grp_fair_result (max_jobs int, claims int, small int, big int);
DO $$
DECLARE
    claims int := 0;
    small int := 0;
    big int := 0;
    r record;
BEGIN
    WHILE small < 1000 AND claims < 5000 LOOP
        claims := claims + 1;
        FOR r IN SELECT * FROM queue.claim('grp_fair', 1) LOOP
            IF r.payload ? 'small' THEN small := small + 1; ELSE big := big + 1; END IF;
            PERFORM queue.complete(r.id);
        END LOOP;
    END LOOP;
    INSERT INTO grp_fair_result VALUES (1, claims, small, big);
END
$$;
SELECT max_jobs, claims <= 1001 AS within_bound, claims, small, big FROM grp_fair_result;
SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'grp_fair';
-- the same with claims of 10 (1,000 more small groups after the big one)
SELECT count(*) FROM (
    SELECT queue.enqueue('grp_fair', jsonb_build_object('n', 'small' || i, 'small', true), group_key => 'g' || i)
      FROM generate_series(1001, 2000) i) e;
DO $$
DECLARE
    claims int := 0;
    small int := 0;
    big int := 0;
    ids bigint[];
    r record;
BEGIN
    WHILE small < 1000 AND claims < 5000 LOOP
        claims := claims + 1;
        ids := '{}';
        FOR r IN SELECT * FROM queue.claim('grp_fair', 10) LOOP
            IF r.payload ? 'small' THEN small := small + 1; ELSE big := big + 1; END IF;
            ids := ids || r.id;
        END LOOP;
        PERFORM queue.complete(ids);
    END LOOP;
    INSERT INTO grp_fair_result VALUES (10, claims, small, big);
END
$$;
SELECT max_jobs, claims <= 101 AS within_bound, claims, small, big FROM grp_fair_result WHERE max_jobs = 10;
-- the big group went in order all along, and only one of it ran at a time
SELECT state, count(*) FROM queue.jobs WHERE queue = 'grp_fair' GROUP BY state ORDER BY state;
SELECT payload->>'n' AS next_big FROM queue.jobs WHERE queue = 'grp_fair' AND state = 'ready';
SELECT array_agg(payload->>'n' ORDER BY id) AS done FROM queue.archive
 WHERE queue = 'grp_fair' AND group_key = 'big';
SELECT queue.drop('grp_fair');

--
-- max_running: at most n jobs of the queue run at once.  Every running
-- job holds one slot of queue.s_<name>.
--
SELECT queue.create('grp_mr', max_running => 2, max_attempts => 2, backoff_base => '0', backoff_max => '0');
SELECT max_running FROM queue.queues WHERE queue = 'grp_mr';
CREATE FUNCTION pg_temp.mr(OUT ready bigint, OUT running bigint, OUT slots_held bigint)
LANGUAGE sql AS $$
    SELECT s.ready, s.running, (SELECT count(*) FROM queue.s_grp_mr WHERE job IS NOT NULL)
      FROM queue.stats s WHERE s.queue = 'grp_mr'
$$;
CREATE FUNCTION pg_temp.mr_id(n text) RETURNS bigint
LANGUAGE sql AS $$ SELECT id FROM queue.jobs WHERE queue = 'grp_mr' AND payload->>'n' = n $$;
SELECT count(*) FROM queue.enqueue_batch('grp_mr',
    ARRAY(SELECT jsonb_build_object('n', 'j' || i) FROM generate_series(1, 5) i));
SELECT payload->>'n' AS n FROM queue.claim('grp_mr', 10);
SELECT count(*) FROM queue.claim('grp_mr', 10);
SELECT * FROM pg_temp.mr();
-- completing one frees its slot
SELECT queue.complete(pg_temp.mr_id('j1'));
SELECT payload->>'n' AS n FROM queue.claim('grp_mr', 10);
SELECT count(*) FROM queue.claim('grp_mr', 10);
-- failing one (to be retried) frees its slot
SELECT queue.fail(pg_temp.mr_id('j2'), 'x');
SELECT * FROM pg_temp.mr();
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_mr', 10);
SELECT count(*) FROM queue.claim('grp_mr', 10);
-- release frees it
SELECT queue.release(pg_temp.mr_id('j3'));
SELECT * FROM pg_temp.mr();
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_mr', 10);
SELECT count(*) FROM queue.claim('grp_mr', 10);
SELECT queue.complete(ARRAY[pg_temp.mr_id('j4'), pg_temp.mr_id('j5')]);
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_mr', 10);
-- failing for good frees it too
SELECT queue.fail(pg_temp.mr_id('j2'), 'y');
SELECT * FROM pg_temp.mr();
SELECT count(*) FROM queue.enqueue_batch('grp_mr',
    ARRAY(SELECT jsonb_build_object('n', 'j' || i) FROM generate_series(6, 8) i));
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_mr', 10);
SELECT count(*) FROM queue.claim('grp_mr', 10);
-- lease expiry (tick) frees it
SELECT queue.complete(ARRAY[pg_temp.mr_id('j3'), pg_temp.mr_id('j6')]);
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_mr', 10, lease => '1 millisecond');
SELECT pg_sleep(0.05);
SELECT pg_temp.expire('grp_mr') AS returned;
SELECT * FROM pg_temp.mr();
SELECT n, state, attempt FROM pg_temp.jobs('grp_mr');
SELECT payload->>'n' AS n, attempt FROM queue.claim('grp_mr', 10);
SELECT count(*) FROM queue.claim('grp_mr', 10);
SELECT count(*) FROM queue.enqueue_batch('grp_mr',
    ARRAY(SELECT jsonb_build_object('n', 'k' || i) FROM generate_series(1, 10) i));
-- complete and claim again in one transaction; a rolled back claim frees
-- its slots
BEGIN;
SELECT queue.complete(ARRAY[pg_temp.mr_id('j7'), pg_temp.mr_id('j8')]);
SELECT payload->>'n' AS n FROM queue.claim('grp_mr', 10);
SELECT count(*) FROM queue.claim('grp_mr', 10);
SELECT * FROM pg_temp.mr();
COMMIT;
BEGIN;
SELECT queue.complete(pg_temp.mr_id('k1'));
SELECT payload->>'n' AS n FROM queue.claim('grp_mr', 10);
ROLLBACK;
SELECT * FROM pg_temp.mr();
SELECT count(*) FROM queue.claim('grp_mr', 10);
-- alter raises the limit ...
SELECT queue.alter('grp_mr', max_running => 3);
SELECT max_running FROM queue.queues WHERE queue = 'grp_mr';
SELECT payload->>'n' AS n FROM queue.claim('grp_mr', 10);
SELECT count(*) FROM queue.claim('grp_mr', 10);
SELECT * FROM pg_temp.mr();
-- ... and lowers it: no claim gets a job while 1 or more run, whichever of
-- the running jobs finish first
SELECT queue.alter('grp_mr', max_running => 1);
SELECT count(*) FROM queue.claim('grp_mr', 10);
SELECT queue.complete(pg_temp.mr_id('k1'));
SELECT count(*) FROM queue.claim('grp_mr', 10);
SELECT queue.complete(pg_temp.mr_id('k2'));
SELECT count(*) FROM queue.claim('grp_mr', 10);
SELECT * FROM pg_temp.mr();
SELECT queue.complete(pg_temp.mr_id('k3'));
SELECT payload->>'n' AS n FROM queue.claim('grp_mr', 10);
SELECT count(*) FROM queue.claim('grp_mr', 10);
SELECT * FROM pg_temp.mr();
-- 0 removes it
SELECT queue.alter('grp_mr', max_running => 0);
SELECT max_running FROM queue.queues WHERE queue = 'grp_mr';
SELECT payload->>'n' AS n FROM queue.claim('grp_mr', 10);
SELECT ready, running FROM queue.stats WHERE queue = 'grp_mr';
-- jobs that finish while there is no limit leave no slot taken behind: set
-- again, the limit is the new one exactly
SELECT queue.complete(ARRAY(SELECT id FROM queue.jobs WHERE queue = 'grp_mr' AND state = 'running'));
SELECT queue.alter('grp_mr', max_running => 2);
SELECT count(*) FROM queue.enqueue_batch('grp_mr',
    ARRAY(SELECT jsonb_build_object('n', 'm' || i) FROM generate_series(1, 5) i));
SELECT payload->>'n' AS n FROM queue.claim('grp_mr', 10);
SELECT count(*) FROM queue.claim('grp_mr', 10);
SELECT * FROM pg_temp.mr();
-- other options leave it alone
SELECT queue.alter('grp_mr', lease => '1 minute');
SELECT max_running FROM queue.queues WHERE queue = 'grp_mr';
SELECT queue.drop('grp_mr');

-- A limit set on a queue whose jobs are running counts them too.
SELECT queue.create('grp_mr2');
SELECT count(*) FROM queue.enqueue_batch('grp_mr2',
    ARRAY(SELECT jsonb_build_object('n', 'n' || i) FROM generate_series(1, 6) i));
SELECT payload->>'n' AS n FROM queue.claim('grp_mr2', 3);
SELECT queue.alter('grp_mr2', max_running => 2);
SELECT count(*) FROM queue.claim('grp_mr2', 10);
SELECT queue.complete(id) FROM queue.jobs WHERE queue = 'grp_mr2' AND payload->>'n' = 'n1';
SELECT count(*) FROM queue.claim('grp_mr2', 10);
SELECT queue.complete(id) FROM queue.jobs WHERE queue = 'grp_mr2' AND payload->>'n' = 'n2';
SELECT payload->>'n' AS n FROM queue.claim('grp_mr2', 10);
SELECT count(*) FROM queue.claim('grp_mr2', 10);
SELECT ready, running FROM queue.stats WHERE queue = 'grp_mr2';
SELECT queue.drop('grp_mr2');

-- max_running and groups together
SELECT queue.create('grp_mr_groups', max_running => 2);
DO $$ BEGIN
    FOR i IN 1..2 LOOP
        PERFORM queue.enqueue('grp_mr_groups', jsonb_build_object('n', g || i), group_key => g)
           FROM unnest(ARRAY['a', 'b', 'c']) g;
    END LOOP;
END $$;
SELECT * FROM pg_temp.rounds('grp_mr_groups', 10);
SELECT count(*) FILTER (WHERE job IS NOT NULL) AS held, count(*) AS slots FROM queue.s_grp_mr_groups;
SELECT queue.drop('grp_mr_groups');

--
-- Validation.
--
SELECT queue.create('grp_bad', max_running => 0);
SELECT queue.create('grp_bad', max_running => -1);
SELECT queue.create('grp_bad', max_running => 100001);
SELECT queue.create('grp_bad', group_retry => 'foo');
SELECT queue.create('grp_bad', group_retry => NULL);
SELECT count(*) FROM queue.queues WHERE queue = 'grp_bad';
SELECT queue.create('grp_bad', max_running => 100000);
SELECT max_running, group_retry FROM queue.queues WHERE queue = 'grp_bad';
SELECT queue.alter('grp_bad', max_running => -1);
SELECT queue.alter('grp_bad', max_running => 100001);
SELECT queue.alter('grp_bad', group_retry => 'foo');
SELECT max_running, group_retry FROM queue.queues WHERE queue = 'grp_bad';
SELECT queue.drop('grp_bad');
