--
-- The queue's saved plans stay on their indexes however the table looked
-- when they were made (src/qcache.c, queue_planner and QueueGetPlan).
-- Planned while the table was empty, as it often is when autovacuum's
-- update of its pg_class row makes every backend replan, they scanned the
-- whole table once a backlog had built up; and after ANALYZE had seen many
-- matching rows, a look for any one of them (EXISTS, or LIMIT 1 alone)
-- did too, and read every row when none matched.
--
SELECT queue.create('plans');
SELECT qno AS plans_qno FROM queue.queue_config WHERE name = 'plans' \gset

-- This session's sequential scans of the queue's table that it has not
-- reported yet: within one transaction, nothing reports them.
CREATE FUNCTION pg_temp.seq_scans() RETURNS bigint LANGUAGE sql
AS $$ SELECT coalesce((SELECT seq_scan FROM pg_stat_xact_user_tables
                        WHERE relid = 'queue.q_plans'::regclass), 0) $$;

-- What a session of producers, consumers and the worker runs besides
-- claim and complete (which scan the indexes themselves), and its count
-- of sequential scans.
CREATE FUNCTION pg_temp.statements(qno int) RETURNS TABLE (step text, result text, seq_scans bigint)
LANGUAGE plpgsql AS $$
DECLARE
    before bigint := pg_temp.seq_scans();
BEGIN
    -- a group without jobs, and one with many
    step := 'enqueue into a new group';
    result := queue.enqueue('plans', '{"n": 3}', group_key => 'new' || clock_timestamp()) > 0;
    seq_scans := pg_temp.seq_scans() - before; RETURN NEXT;
    step := 'enqueue into a busy group';
    result := queue.enqueue('plans', '{"n": 3}', group_key => 'g1') > 0;
    seq_scans := pg_temp.seq_scans() - before; RETURN NEXT;
    -- the claims' promotion statement as if two hours had passed
    step := 'promote';
    SELECT format('%s promoted, more due: %s', promoted, left_due) INTO result
      FROM queue._tick_promote(qno, now() + interval '2 hours', NULL, NULL, 10);
    seq_scans := pg_temp.seq_scans() - before; RETURN NEXT;
    -- the worker's look for the next due time: a naptime on, if any is due
    step := 'next due time';
    result := extract(epoch FROM queue._tick_next_due(qno, now() + interval '2 hours', 0, 10, '1 second')
                                 - now() - interval '2 hours') || ' s later';
    seq_scans := pg_temp.seq_scans() - before; RETURN NEXT;
    step := 'claim and fail';
    SELECT queue.fail(id, 'boom') INTO result FROM queue.claim('plans', 1);
    seq_scans := pg_temp.seq_scans() - before; RETURN NEXT;
    step := 'claim and release';
    SELECT queue.release(id) INTO result FROM queue.claim('plans', 1);
    seq_scans := pg_temp.seq_scans() - before; RETURN NEXT;
    step := 'claim and complete';
    SELECT queue.complete(array_agg(id)) INTO result FROM queue.claim('plans', 12);
    seq_scans := pg_temp.seq_scans() - before; RETURN NEXT;
END
$$;

-- the plans, made on the empty table
VACUUM queue.q_plans;
BEGIN;
SELECT step, result FROM pg_temp.statements(:plans_qno);
ROLLBACK;

-- 20,000 jobs due in an hour, and four groups of 5,000 jobs each
SELECT count(*) FROM queue.enqueue_batch('plans', array_fill('{"n": 1}'::jsonb, ARRAY[20000]),
                                         run_at => now() + interval '1 hour');
SELECT count(*)
  FROM generate_series(1, 4) g,
       LATERAL queue.enqueue_batch('plans', array_fill('{"n": 2}'::jsonb, ARRAY[5000]), group_key => 'g' || g);

-- the same plans on the full table
BEGIN;
SELECT * FROM pg_temp.statements(:plans_qno);
ROLLBACK;

-- planned again, with statistics that say many jobs are scheduled, and
-- many are in a few groups
ANALYZE queue.q_plans;
BEGIN;
SELECT * FROM pg_temp.statements(:plans_qno);
ROLLBACK;

SELECT queue.drop('plans');
