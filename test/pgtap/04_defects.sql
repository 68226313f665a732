-- 04_defects.sql: defects found in review, each asserted as it should be.
--
--   * queue._advance_groups and queue._free_slots refuse a caller who may
--     not write the queue's table (42501), as queue._count, _recount and
--     _lock_group do (queue_check_writer), also when nothing would reach
--     the executor (empty arrays, arrays of NULLs).
--   * A statement of enqueue(dedup_key =>) or of fail()'s requeue that a
--     trigger skipped is an error naming the queue (55000, queue_spi_check),
--     not a retry loop ending in 55P03, nor a 'retry' that did not happen.
--   * An unknown job id is undefined_object (42704), like an unknown queue,
--     not no_data_found (P0002).
--   * queue.complete(ids bigint[]) takes at most 100,000 ids (54000).
--
-- The whole file is one transaction, rolled back at the end.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(25);

-- The state of a job as queue.jobs shows it (jobs claimed in this
-- transaction included), or NULL.
CREATE FUNCTION pg_temp.st(bigint) RETURNS text LANGUAGE sql AS $$
    SELECT j.state FROM queue.jobs j WHERE j.id = $1
$$;

/* ------------------------------------------- internal functions: writers only */

SELECT queue.create('df_priv', max_running => 2);
SELECT qno AS priv_qno FROM queue.queue_config WHERE name = 'df_priv' \gset
-- without max_running: _free_slots has no statement to run, whatever the ids
SELECT queue.create('df_priv2');
SELECT qno AS priv2_qno FROM queue.queue_config WHERE name = 'df_priv2' \gset
CREATE ROLE df_nobody NOLOGIN;
SET ROLE df_nobody;
SELECT throws_ok(format($$SELECT queue._advance_groups(%s, '{}'::text[])$$, :priv_qno),
                 '42501', NULL,
                 '_advance_groups(qno, ''{}'') by a role that may not write the queue''s table: 42501');
SELECT throws_ok(format($$SELECT queue._advance_groups(%s, ARRAY[NULL]::text[])$$, :priv_qno),
                 '42501', NULL,
                 '_advance_groups(qno, ''{NULL}'') by a role that may not write the queue''s table: 42501');
SELECT throws_ok(format($$SELECT queue._free_slots(%s, '{}'::bigint[])$$, :priv_qno),
                 '42501', NULL,
                 '_free_slots(qno, ''{}'') by a role that may not write the queue''s table: 42501');
SELECT throws_ok(format($$SELECT queue._free_slots(%s, ARRAY[NULL]::bigint[])$$, :priv2_qno),
                 '42501', NULL,
                 '_free_slots(qno, ''{NULL}''), queue without max_running, by a role that may not write its table: 42501');
SELECT throws_ok(format($$SELECT queue._free_slots(%s, ARRAY[%s]::bigint[])$$, :priv2_qno, 1000000 + :priv2_qno),
                 '42501', NULL,
                 '_free_slots(qno, ARRAY[id]), queue without max_running, by a role that may not write its table: 42501');
RESET ROLE;

/* ------------------------------------- enqueue(dedup_key =>): insert skipped */

SELECT queue.create('df_ins');
CREATE FUNCTION pg_temp.skip_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END
$$;
CREATE TRIGGER df_skip BEFORE INSERT ON queue.q_df_ins
    FOR EACH ROW EXECUTE FUNCTION pg_temp.skip_insert();
SELECT throws_ok($$SELECT queue.enqueue('df_ins', '{}', dedup_key => 'k')$$,
                 '55000', NULL,
                 'enqueue with dedup_key whose insert a trigger skipped: 55000 object_not_in_prerequisite_state');
SELECT throws_like($$SELECT queue.enqueue('df_ins', '{}', dedup_key => 'k')$$,
                   '%df_ins%',
                   'enqueue with dedup_key whose insert a trigger skipped: the message names the queue');

/* ------------------------------------ fail() with group_retry => 'requeue' */

SELECT queue.create('df_rq', group_retry => 'requeue');
SELECT queue.enqueue('df_rq', '{"n": 1}', group_key => 'g') AS rq1 \gset
SELECT queue.enqueue('df_rq', '{"n": 2}', group_key => 'g') AS rq2 \gset
CREATE FUNCTION pg_temp.skip_waiting() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'waiting' THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER df_skip_waiting BEFORE UPDATE ON queue.q_df_rq
    FOR EACH ROW EXECUTE FUNCTION pg_temp.skip_waiting();
-- (the group's head: \gset fails the file if the claim returned nothing)
SELECT id AS rq_claimed FROM queue.claim('df_rq') \gset
SELECT throws_ok(format($$SELECT queue.fail(%s, 'x')$$, :rq_claimed),
                 '55000', NULL,
                 'fail() whose requeue a trigger skipped: 55000, not ''retry''');
SELECT results_eq(format('SELECT id, state, attempt FROM queue.jobs WHERE id = %s', :rq_claimed),
                  format($$VALUES (%s::bigint, 'running'::text, 1)$$, :rq1),
                  'fail() whose requeue a trigger skipped changed nothing: the job is still running, attempt 1');
SELECT results_eq($$SELECT ready, scheduled, running, waiting FROM queue.stats WHERE queue = 'df_rq'$$,
                  $$VALUES (0::bigint, 0::bigint, 1::bigint, 1::bigint)$$,
                  'queue.stats still counts one running and one waiting job');

/* --------------------------------------------------- unknown job id: 42704 */

SELECT queue.create('df_ids');
SELECT qno AS ids_qno FROM queue.queue_config WHERE name = 'df_ids' \gset
-- 999999: no queue has that number
SELECT throws_ok('SELECT queue.complete(999999)', '42704', NULL, 'complete(unknown id): 42704');
SELECT throws_ok($$SELECT queue.fail(999999, 'x')$$, '42704', NULL, 'fail(unknown id): 42704');
SELECT throws_ok($$SELECT queue.extend(999999, '1 min')$$, '42704', NULL, 'extend(unknown id): 42704');
SELECT throws_ok('SELECT queue.release(999999)', '42704', NULL, 'release(unknown id): 42704');
SELECT throws_ok('SELECT * FROM queue.history(999999)', '42704', NULL, 'history(unknown id): 42704');
SELECT throws_ok('SELECT queue.reschedule(999999, now())', '42704', NULL, 'reschedule(unknown id): 42704');
SELECT throws_ok('SELECT queue.cancel(999999)', '42704', NULL, 'cancel(unknown id): 42704');
SELECT throws_ok('SELECT queue.retry(999999)', '42704', NULL, 'retry(unknown id): 42704');
SELECT throws_ok('SELECT queue.complete(0)', '42704', NULL, 'complete(0): 42704');
SELECT throws_ok('SELECT queue.complete(-5)', '42704', NULL, 'complete(-5): 42704');
SELECT throws_ok(format('SELECT queue.complete(%s)', -(1000000 + :ids_qno)), '42704', NULL,
                 'complete(-(1000000 + qno of an existing queue)): 42704');
-- An id of an existing queue that no job of it ever had: history() says
-- the job does not exist, so it is 42704 too.  (complete, fail, extend,
-- release, reschedule, cancel and retry say 55000 for such an id, as for a
-- job that finished, which they cannot tell apart: not asserted here.)
SELECT throws_ok(format('SELECT * FROM queue.history(%s)', 777000000 + :ids_qno), '42704', NULL,
                 'history(id of an existing queue, no such job): 42704');

/* ------------------------------------ complete(ids bigint[]): 100,000 at most */

SELECT queue.create('df_many');
SELECT qno AS many_qno FROM queue.queue_config WHERE name = 'df_many' \gset
SELECT queue.enqueue('df_many', '{}') AS m1 \gset
SELECT id AS m_claimed FROM queue.claim('df_many') \gset
-- the running job and 100,000 ids of the queue that no job has
SELECT throws_ok(format($$SELECT queue.complete(ARRAY[%s::bigint] ||
                              ARRAY(SELECT g * 1000000 + %s FROM generate_series(1000::bigint, 100999) g))$$,
                        :m_claimed, :many_qno),
                 '54000', NULL, 'complete() of 100,001 ids: 54000 program_limit_exceeded');
SELECT is(pg_temp.st(:m_claimed), 'running', 'complete() of 100,001 ids changed nothing: the job is still running');
SELECT is(queue.complete(ARRAY(SELECT g * 1000000 + :many_qno FROM generate_series(1000::bigint, 100999) g)),
          0::bigint, 'complete() of exactly 100,000 ids (none of them jobs) works and returns 0');

SELECT * FROM finish();
ROLLBACK;
