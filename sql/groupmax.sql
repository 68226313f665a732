--
-- groupmax.sql: group_max_running n, up to n jobs of a group active at
-- once (ready, scheduled or running), the oldest, the rest waiting.
--
-- Queues of this file are named grp_n*; jobs are printed by their payload.
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

SELECT queue.create('grp_n', group_max_running => 2);
SELECT group_max_running FROM queue.queues WHERE queue = 'grp_n';
SELECT queue.enqueue('grp_n', jsonb_build_object('n', 'a' || i), group_key => 'a') > 0 AS enqueued
  FROM generate_series(1, 5) i;
SELECT queue.enqueue('grp_n', '{"n": "b1"}', group_key => 'b') > 0 AS enqueued;
SELECT * FROM pg_temp.jobs('grp_n');
-- a claim of 10 gets the two active jobs of a and b's one
SELECT payload->>'n' AS n FROM queue.claim('grp_n', 10) ORDER BY 1;
-- completing a1 lets a3 move up; a fail with a retry keeps its place
-- (group_retry 'block'), so a2's retry still holds one of the two
SELECT queue.complete(id) FROM queue.jobs WHERE queue = 'grp_n' AND payload->>'n' = 'a1';
SELECT queue.fail(id, 'again', retry_in => '1 hour') FROM queue.jobs WHERE queue = 'grp_n' AND payload->>'n' = 'a2';
SELECT * FROM pg_temp.jobs('grp_n');
SELECT payload->>'n' AS n FROM queue.claim('grp_n', 10);
-- cancel of the scheduled retry lets the next (a4) move up
SELECT queue.cancel(id) FROM queue.jobs WHERE queue = 'grp_n' AND payload->>'n' = 'a2';
SELECT * FROM pg_temp.jobs('grp_n');
-- a new job waits behind the waiting ones, though a slot might free first
SELECT queue.enqueue('grp_n', '{"n": "a6"}', group_key => 'a') > 0 AS enqueued;
SELECT * FROM pg_temp.jobs('grp_n') WHERE g = 'a';
-- alter raises n: the waiting jobs move up at once, in id order
SELECT queue.alter('grp_n', group_max_running => 4);
SELECT * FROM pg_temp.jobs('grp_n') WHERE g = 'a';
-- and lowers it: nothing stops; a new job waits, and moves up only once
-- none of the group is active any more
SELECT queue.alter('grp_n', group_max_running => 1);
SELECT queue.enqueue('grp_n', '{"n": "a7"}', group_key => 'a') > 0 AS enqueued;
SELECT queue.complete(id) FROM queue.claim('grp_n', 10);
SELECT * FROM pg_temp.jobs('grp_n');
SELECT queue.complete(id) FROM queue.jobs WHERE queue = 'grp_n' AND payload->>'n' = 'a3';
SELECT * FROM pg_temp.jobs('grp_n');
SELECT queue.drop('grp_n');

-- enqueue_batch: the first n of a batch start, the rest wait
SELECT queue.create('grp_nb', group_max_running => 3);
SELECT count(*) FROM queue.enqueue_batch('grp_nb', ARRAY(SELECT jsonb_build_object('n', i) FROM generate_series(1, 5) i),
                                         group_key => 'g');
SELECT * FROM pg_temp.jobs('grp_nb');
SELECT * FROM pg_temp.rounds('grp_nb', 10);
SELECT queue.drop('grp_nb');

-- claims held in a transaction block count as active jobs of their group
SELECT queue.create('grp_nh', group_max_running => 2);
SELECT queue.enqueue('grp_nh', jsonb_build_object('n', i), group_key => 'g') > 0 AS enqueued
  FROM generate_series(1, 4) i;
BEGIN;
SELECT payload->>'n' AS n FROM queue.claim('grp_nh', 10);
SELECT queue.complete(id) FROM queue.jobs WHERE queue = 'grp_nh' AND payload->>'n' = '1';
SELECT queue.enqueue('grp_nh', '{"n": 5}', group_key => 'g') > 0 AS enqueued;
COMMIT;
SELECT * FROM pg_temp.jobs('grp_nh');
SELECT queue.drop('grp_nh');

-- with max_running: each bounds the claim on its own
SELECT queue.create('grp_nmr', group_max_running => 3, max_running => 2);
SELECT queue.enqueue('grp_nmr', jsonb_build_object('n', i), group_key => 'g') > 0 AS enqueued
  FROM generate_series(1, 4) i;
SELECT * FROM pg_temp.rounds('grp_nmr', 10);
SELECT queue.drop('grp_nmr');

SELECT queue.create('grp_nbad', group_max_running => 0);
SELECT queue.create('grp_nbad', group_max_running => 10001);
SELECT queue.create('grp_nbad', group_max_running => NULL);
SELECT count(*) FROM queue.queues WHERE queue = 'grp_nbad';
SELECT queue.create('grp_nbad');
SELECT queue.alter('grp_nbad', group_max_running => -2);
SELECT group_max_running FROM queue.queues WHERE queue = 'grp_nbad';
SELECT queue.drop('grp_nbad');
