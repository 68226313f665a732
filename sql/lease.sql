--
-- lease.sql: one lease for a batch (src/lease.c).  A claim of more than
-- one job in a transaction of its own leaves the rows 'ready' and as they
-- are, and writes one row into queue.l_<name>; to everyone else the jobs
-- are running, exactly as if each row had been marked.
--
-- Queues of this file are named ls_*.  A background worker may do
-- tick()'s work at any moment, so the tests check what tick() leaves
-- behind, not the counts it returns.
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

CREATE FUNCTION pg_temp.hist(job bigint)
RETURNS TABLE (event text, attempt int, detail text)
LANGUAGE sql AS $$
    SELECT h.event, h.attempt, h.detail
      FROM queue.history(job) WITH ORDINALITY AS h(at, event, attempt, detail, n)
     ORDER BY h.n
$$;
-- the jobs of queue q, as queue.jobs shows them and as their rows are
-- (in_lease: a lease row lists the job at the attempt its row has)
CREATE FUNCTION pg_temp.jobs(q text)
RETURNS TABLE (n text, state text, attempt int, claimed boolean, leased boolean, row_state text, in_lease boolean)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format($f$
        SELECT j.payload->>'n', j.state, j.attempt, j.claimed_at IS NOT NULL, j.lease_until > now(),
               r.state::text, EXISTS (SELECT 1 FROM queue.%I l, unnest(l.ids, l.attempts) u(id, attempt)
                                       WHERE u.id = r.id AND u.attempt = r.attempt)
          FROM queue.jobs j JOIN queue.%I r USING (id)
         WHERE j.queue = %L ORDER BY j.id$f$, 'l_' || q, 'q_' || q, q);
END
$$;

--
-- a claim of several jobs in a transaction of its own
--
SELECT queue.create('ls_basic', lease => '1 hour');
SELECT count(*) FROM queue.enqueue_batch('ls_basic', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 4}']::jsonb[]);
SELECT payload->>'n' AS n, attempt, lease_until > now() AS leased FROM queue.claim('ls_basic', 3);
-- one lease row names the three jobs; their rows are ready and unchanged
SELECT cardinality(ids) AS jobs, owner_pid = pg_backend_pid() AS mine,
       lease_until - claimed_at AS lease
  FROM queue.l_ls_basic;
SELECT * FROM pg_temp.jobs('ls_basic');
SELECT queue, ready, running FROM queue.stats WHERE queue = 'ls_basic';
-- nobody else gets them
SELECT payload->>'n' AS n FROM queue.claim('ls_basic', 10);
SELECT payload->>'n' AS n FROM queue.claim('ls_basic', 10);
-- a claim that finds one job leases it the same way
SELECT * FROM pg_temp.jobs('ls_basic');
SELECT count(*) AS leases FROM queue.l_ls_basic;

--
-- complete: by token, stale tokens, one at a time and all at once
--
SELECT queue.create('ls_done', lease => '1 hour');
SELECT count(*) FROM queue.enqueue_batch('ls_done', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 4}']::jsonb[]);
SELECT array_agg(id ORDER BY id) AS ids FROM queue.claim('ls_done', 4) \gset
SELECT (:'ids'::bigint[])[1] AS d1, (:'ids'::bigint[])[2] AS d2, (:'ids'::bigint[])[3] AS d3,
       (:'ids'::bigint[])[4] AS d4 \gset
-- a token that was never handed out changes nothing
SELECT queue.complete(:d1, 2);
SELECT queue.complete(:d1, 0);
SELECT queue.complete(:d1, 1);
-- done once
SELECT queue.complete(:d1, 1);
CALL pg_temp.try('SELECT queue.complete($1)', :d1);
SELECT payload->>'n' AS n, state, attempt, claimed_at IS NOT NULL AS claimed FROM queue.archive
 WHERE queue = 'ls_done' ORDER BY id;
-- the lease stays while a job of it is left
SELECT cardinality(ids) AS listed FROM queue.l_ls_done;
SELECT queue.complete(ARRAY[:d2, :d3]);
SELECT count(*) AS leases FROM queue.l_ls_done;
SELECT queue.complete(:d4);
-- gone with its last job
SELECT count(*) AS leases FROM queue.l_ls_done;
SELECT count(*) AS archived FROM queue.archive WHERE queue = 'ls_done';
SELECT * FROM pg_temp.hist(:d2);
-- a rolled-back completion leaves the job leased
SELECT count(*) FROM queue.enqueue_batch('ls_done', ARRAY['{"n": 5}', '{"n": 6}']::jsonb[]);
SELECT array_agg(id ORDER BY id) AS ids FROM queue.claim('ls_done', 2) \gset
BEGIN;
SELECT queue.complete(:'ids'::bigint[]);
SELECT count(*) AS leases FROM queue.l_ls_done;
ROLLBACK;
SELECT * FROM pg_temp.jobs('ls_done');
SELECT queue.complete(:'ids'::bigint[]);
SELECT count(*) AS leases FROM queue.l_ls_done;
-- claimed and completed in one statement, in a transaction of its own
SELECT count(*) FROM queue.enqueue_batch('ls_done', ARRAY['{"n": 7}', '{"n": 8}']::jsonb[]);
SELECT bool_and(queue.complete(id, attempt)) AS completed FROM queue.claim('ls_done', 2);
SELECT count(*) AS leases FROM queue.l_ls_done;
SELECT count(*) AS left FROM queue.jobs WHERE queue = 'ls_done';

--
-- fail, extend and release: the job becomes a running row of its own
--
SELECT queue.create('ls_one', lease => '1 hour', backoff_base => '0', max_attempts => 2);
SELECT count(*) FROM queue.enqueue_batch('ls_one', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 4}']::jsonb[]);
SELECT array_agg(id ORDER BY id) AS ids FROM queue.claim('ls_one', 4) \gset
SELECT (:'ids'::bigint[])[1] AS o1, (:'ids'::bigint[])[2] AS o2, (:'ids'::bigint[])[3] AS o3,
       (:'ids'::bigint[])[4] AS o4 \gset
SELECT queue.fail(:o1, 'boom', attempt => 2) IS NULL AS stale;
SELECT queue.fail(:o1, 'boom', attempt => 1);
SELECT queue.extend(:o2, '2 hours', attempt => 1) > now() + interval '90 minutes' AS extended;
SELECT queue.release(:o3, attempt => 1);
SELECT * FROM pg_temp.jobs('ls_one');
-- (their lease row still lists them, but at the attempts they had)
SELECT cardinality(ids) AS listed FROM queue.l_ls_one;
SELECT * FROM pg_temp.hist(:o1);
SELECT * FROM pg_temp.hist(:o3);
-- the extended job completes as any running job
SELECT queue.complete(:o2, 1);
-- the last job of the lease leaves it: the lease row goes
SELECT queue.fail(:o4, 'last', attempt => 1);
SELECT count(*) AS leases FROM queue.l_ls_one;

-- a transaction sees what it did to leased jobs: a complete after an
-- extend, a claim of a job it released; a stale token changes nothing
SELECT queue.create('ls_same', lease => '1 hour');
SELECT count(*) FROM queue.enqueue_batch('ls_same', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[]);
SELECT array_agg(id ORDER BY id) AS ids FROM queue.claim('ls_same', 3) \gset
BEGIN;
SELECT queue.extend((:'ids'::bigint[])[1], '2 hours', attempt => 1) > now() AS extended;
SELECT queue.complete((:'ids'::bigint[])[1], attempt => 1);
SELECT queue.release((:'ids'::bigint[])[2], attempt => 1);
SELECT payload->>'n' AS n, attempt FROM queue.claim('ls_same', 10);
SELECT queue.fail((:'ids'::bigint[])[3], 'x', attempt => 2) IS NULL AS stale;
SELECT * FROM pg_temp.jobs('ls_same');
COMMIT;
SELECT * FROM pg_temp.jobs('ls_same');
SELECT cardinality(ids) AS listed FROM queue.l_ls_same;

-- a job taken off its lease in a transaction of its own can be claimed
-- in the same one (marked running, since its entry goes only at commit)
SELECT queue.create('ls_redo', lease => '1 hour');
SELECT count(*) FROM queue.enqueue_batch('ls_redo', ARRAY['{"n": 1}', '{"n": 2}']::jsonb[]);
SELECT count(*) FROM queue.claim('ls_redo', 2);
DO $$
DECLARE
    x bigint;
BEGIN
    SELECT min(u.id) INTO x FROM queue.l_ls_redo, unnest(ids) u(id);
    PERFORM queue.release(x);
    PERFORM queue.claim('ls_redo', 10);
END
$$;
SELECT * FROM pg_temp.jobs('ls_redo');

-- a table rewritten under its leased jobs: complete finds them by id
SELECT queue.create('ls_rewrite', lease => '1 hour');
SELECT count(*) FROM queue.enqueue_batch('ls_rewrite',
    ARRAY(SELECT jsonb_build_object('n', i) FROM generate_series(1, 300) i));
SELECT queue.complete(ARRAY(SELECT id FROM queue.claim('ls_rewrite', 250)));
SELECT array_agg(id ORDER BY id) AS ids FROM queue.claim('ls_rewrite', 5) \gset
VACUUM FULL queue.q_ls_rewrite;
SELECT queue.complete((:'ids'::bigint[])[1], 1);
SELECT queue.complete(:'ids'::bigint[]);
SELECT count(*) AS leases FROM queue.l_ls_rewrite;

-- A retried job keeps its attempt number going: a lease that listed it
-- (and still stands for its other jobs) cannot hold it again.
SELECT queue.create('ls_retry', lease => '1 hour', max_attempts => 1);
SELECT count(*) FROM queue.enqueue_batch('ls_retry', ARRAY['{"n": 1}', '{"n": 2}']::jsonb[]);
SELECT array_agg(id ORDER BY id) AS ids FROM queue.claim('ls_retry', 2) \gset
SELECT queue.fail((:'ids'::bigint[])[1], 'boom', attempt => 1);
SELECT queue.retry((:'ids'::bigint[])[1]);
SELECT * FROM pg_temp.jobs('ls_retry');
SELECT payload->>'n' AS n, attempt FROM queue.claim('ls_retry', 10);
SELECT * FROM pg_temp.hist((:'ids'::bigint[])[1]);

--
-- management: a job under a batch lease is running
--
SELECT queue.create('ls_manage', lease => '1 hour');
SELECT count(*) FROM queue.enqueue_batch('ls_manage', ARRAY['{"n": 1, "c": 7}', '{"n": 2, "c": 7}', '{"n": 3, "c": 7}']::jsonb[]);
SELECT array_agg(id ORDER BY id) AS ids FROM queue.claim('ls_manage', 2) \gset
SELECT (:'ids'::bigint[])[1] AS m1 \gset
CALL pg_temp.try('SELECT queue.cancel($1)', :m1);
CALL pg_temp.try($$SELECT queue.reschedule($1, now() + interval '1 day')$$, :m1);
CALL pg_temp.try('SELECT queue.retry($1)', :m1);
SELECT queue.purge('ls_manage', '{"c": 7}');
SELECT * FROM pg_temp.jobs('ls_manage');
SELECT * FROM pg_temp.hist(:m1);
-- a new max_running counts them: they become running rows with slots
SELECT queue.alter('ls_manage', max_running => 5);
SELECT * FROM pg_temp.jobs('ls_manage');
SELECT count(*) AS leases FROM queue.l_ls_manage;
SELECT count(*) AS slots_held FROM queue.s_ls_manage WHERE job IS NOT NULL;
SELECT queue.complete(:'ids'::bigint[]);
SELECT count(*) AS slots_held FROM queue.s_ls_manage WHERE job IS NOT NULL;
-- with max_running, claims mark each job
SELECT payload->>'n' AS n FROM queue.claim('ls_manage', 5);
SELECT count(*) AS leases FROM queue.l_ls_manage;

--
-- expiry: the worker (or tick) returns the jobs, counting the attempt
--
SELECT queue.create('ls_expire', max_attempts => 2);
SELECT count(*) FROM queue.enqueue_batch('ls_expire', ARRAY['{"n": 1}', '{"n": 2}']::jsonb[]);
SELECT array_agg(id ORDER BY id) AS ids FROM queue.claim('ls_expire', 2, lease => '1 millisecond') \gset
SELECT (:'ids'::bigint[])[1] AS x1 \gset
SELECT pg_sleep(0.05);
SELECT count(*) > 0 AS ticked FROM queue.tick();
SELECT * FROM pg_temp.jobs('ls_expire');
SELECT count(*) AS leases FROM queue.l_ls_expire;
SELECT last_error FROM queue.jobs WHERE id = :x1;
SELECT * FROM pg_temp.hist(:x1);
-- the consumer that lost them gets false / NULL for its stale tokens
SELECT queue.complete(:x1, 1);
SELECT queue.fail(:x1, 'too late', attempt => 1) IS NULL AS stale;
-- claimed again, attempt 2; the second expiry is the last attempt: dead
SELECT payload->>'n' AS n, attempt FROM queue.claim('ls_expire', 2, lease => '1 millisecond');
SELECT pg_sleep(0.05);
SELECT count(*) > 0 AS ticked FROM queue.tick();
SELECT * FROM pg_temp.jobs('ls_expire');
SELECT * FROM pg_temp.hist(:x1);
SELECT queue.complete(:x1, 2);
-- leases that have not run out are left alone
SELECT queue.retry(:x1);
SELECT count(*) FROM queue.claim('ls_expire', 2, lease => '1 hour');
SELECT count(*) > 0 AS ticked FROM queue.tick();
SELECT * FROM pg_temp.jobs('ls_expire');

--
-- when claims mark each job instead
--
SELECT queue.create('ls_rows', lease => '1 hour');
SELECT count(*) FROM queue.enqueue_batch('ls_rows', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 4}', '{"n": 5}']::jsonb[]);
-- one job asked for
SELECT payload->>'n' AS n FROM queue.claim('ls_rows');
-- in a transaction block (held until commit, src/held.c)
BEGIN;
SELECT payload->>'n' AS n FROM queue.claim('ls_rows', 2);
COMMIT;
-- serializable
SET default_transaction_isolation = 'serializable';
SELECT payload->>'n' AS n FROM queue.claim('ls_rows', 2);
RESET default_transaction_isolation;
SELECT * FROM pg_temp.jobs('ls_rows');
SELECT count(*) AS leases FROM queue.l_ls_rows;
-- jobs of groups keep their order in their rows
SELECT queue.create('ls_groups', lease => '1 hour');
SELECT queue.enqueue('ls_groups', '{"n": 1}', group_key => 'a') > 0 AS enqueued;
SELECT queue.enqueue('ls_groups', '{"n": 2}', group_key => 'a') > 0 AS enqueued;
SELECT queue.enqueue('ls_groups', '{"n": 3}') > 0 AS enqueued;
SELECT queue.enqueue('ls_groups', '{"n": 4}', group_key => 'b') > 0 AS enqueued;
SELECT payload->>'n' AS n FROM queue.claim('ls_groups', 10) ORDER BY 1;
SELECT * FROM pg_temp.jobs('ls_groups');

-- Claims work on the queue's tables as their owner: a role with the
-- consume privilege (and no rights on the tables) takes batch leases too.
DROP ROLE IF EXISTS regress_queue_lessee;
CREATE ROLE regress_queue_lessee;
SELECT queue.create('ls_role', lease => '1 hour');
SELECT queue.grant('ls_role', 'regress_queue_lessee', 'consume');
SELECT queue.grant('ls_role', 'regress_queue_lessee', 'read');
SELECT count(*) FROM queue.enqueue_batch('ls_role',
    ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 4}', '{"n": 5}', '{"n": 6}']::jsonb[]);
SET ROLE regress_queue_lessee;
SELECT array_agg(id ORDER BY id) AS rows_ids FROM queue.claim('ls_role', 2) \gset
SELECT has_table_privilege('queue.q_ls_role', 'SELECT, INSERT, UPDATE, DELETE') AS table_rights,
       has_sequence_privilege('queue."q_ls_role$seq"', 'USAGE') AS sequence_rights;
SELECT array_agg(id ORDER BY id) AS lease_ids FROM queue.claim('ls_role', 2) \gset
RESET ROLE;
SELECT * FROM pg_temp.jobs('ls_role');
SET ROLE regress_queue_lessee;
SELECT * FROM pg_temp.hist((:'lease_ids'::bigint[])[1]);
SELECT queue.extend((:'lease_ids'::bigint[])[1], '2 hours', attempt => 1) > now() AS extended;
SELECT queue.complete(:'rows_ids'::bigint[]) + queue.complete(:'lease_ids'::bigint[]) AS completed;
RESET ROLE;
SELECT count(*) AS leases FROM queue.l_ls_role;
-- and it finishes a lease someone else took
SELECT array_agg(id ORDER BY id) AS ids FROM queue.claim('ls_role', 2) \gset
SET ROLE regress_queue_lessee;
SELECT queue.fail((:'ids'::bigint[])[1], 'boom', attempt => 1);
SELECT queue.complete((:'ids'::bigint[])[2], 1);
RESET ROLE;
SELECT * FROM pg_temp.jobs('ls_role');
SELECT count(*) AS leases FROM queue.l_ls_role;
SELECT queue.drop('ls_role');
DROP ROLE regress_queue_lessee;

-- The internal functions run as their callers: each needs what its
-- legitimate callers have.  A producer may neither end leases nor hold
-- them still, nor ask about them; the queue's upkeep ends only leases
-- whose rows it took the jobs off.
DROP ROLE IF EXISTS regress_queue_producer;
CREATE ROLE regress_queue_producer;
SELECT queue.create('ls_sec', lease => '1 hour');
GRANT INSERT ON queue.q_ls_sec TO regress_queue_producer;
SELECT count(*) FROM queue.enqueue_batch('ls_sec', ARRAY['{"n": 1}', '{"n": 2}']::jsonb[]);
SELECT array_agg(id ORDER BY id) AS ids FROM queue.claim('ls_sec', 2) \gset
SELECT lease AS sec_lease FROM queue.l_ls_sec \gset
SELECT qno AS sec_qno FROM queue.queue_config WHERE name = 'ls_sec' \gset
SET ROLE regress_queue_producer;
SELECT queue._lease_dropped(:sec_qno, :sec_lease, :'ids'::bigint[]);
SELECT queue._hold_leases(:sec_qno);
SELECT queue._share_leases(:sec_qno);
SELECT queue._leased((:'ids'::bigint[])[1]);
SELECT queue._lease_claimed_at((:'ids'::bigint[])[1], 0);
SELECT queue._take_leases(:sec_qno);
SELECT queue._ended_leases(:sec_qno);
RESET ROLE;
GRANT SELECT, UPDATE, DELETE ON queue.q_ls_sec TO regress_queue_producer;
SET ROLE regress_queue_producer;
-- (a consumer may not end the leases of others, which alter does)
SELECT queue._take_leases(:sec_qno);
RESET ROLE;
CALL pg_temp.try(format('SELECT queue._lease_dropped(%s, $1, %L)', :sec_qno, :'ids'), :sec_lease);
-- nor through another queue's number
SELECT queue.create('ls_sec2');
SELECT qno AS other_qno FROM queue.queue_config WHERE name = 'ls_sec2' \gset
CALL pg_temp.try(format('SELECT queue._lease_dropped(%s, $1, ''{}'')', :other_qno), :sec_lease);
SELECT queue.drop('ls_sec2');
SELECT queue._leased((:'ids'::bigint[])[1]) AS still_leased;
SELECT payload->>'n' AS n FROM queue.claim('ls_sec', 10);
SELECT queue.drop('ls_sec');
DROP ROLE regress_queue_producer;

--
-- a dropped queue takes its leases along
--
SELECT queue.create('ls_drop');
SELECT count(*) FROM queue.enqueue_batch('ls_drop', ARRAY['{"n": 1}', '{"n": 2}']::jsonb[]);
SELECT count(*) FROM queue.claim('ls_drop', 2);
SELECT queue.drop('ls_drop');
SELECT count(*) FROM pg_class WHERE relname = 'l_ls_drop';
SELECT queue.create('ls_drop');
SELECT count(*) FROM queue.enqueue_batch('ls_drop', ARRAY['{"n": 1}', '{"n": 2}']::jsonb[]);
SELECT count(*) FROM queue.claim('ls_drop', 2);
SELECT queue.drop('ls_drop');

SELECT queue.drop(name) FROM queue.queue_config WHERE name LIKE 'ls\_%' ORDER BY name;
