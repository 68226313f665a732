-- 05_tenants.sql: defects found by trying the extension as a tenant that
-- may use one queue and would like to reach another, each asserted as it
-- should be.
--
--   * A row of one queue's table cannot pose as another queue's job: the
--     id names its queue (seq * 1000000 + queue number), and the table's
--     CHECK "q_<name>$id" refuses (23514) an INSERT or UPDATE by a role
--     with the README's grants on the table that would make an id of
--     another queue.  Without it, queue.jobs listed such a row as the
--     other queue's, and complete(id) of it completed the other queue's
--     job with that id.  enqueue still takes the direct path (no executor
--     for the CHECK), which bench/instructions.sh shows.
--   * queue._held() shows the jobs the transaction holds only of queues
--     the role may read or consume from: a SECURITY DEFINER function that
--     claimed a job of another queue for the transaction left its payload
--     and dedup key readable by its caller.
--   * Nobody can make every backend reread queue_config for nothing:
--     queue._invalidate(), executable by everyone, is gone; the reread
--     follows changes to queue_config, from a statement trigger whose
--     function cannot be called as a function.
--
-- The whole file is one transaction, rolled back at the end.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(13);

SELECT queue.create('tn_a');
SELECT queue.create('tn_b');
SELECT qno AS a_qno FROM queue.queue_config WHERE name = 'tn_a' \gset
SELECT qno AS b_qno FROM queue.queue_config WHERE name = 'tn_b' \gset
-- a role that uses queue tn_a, with the grants on its tables that the
-- README of 0.3 asked for (0.4 needs none: queue.grant)
CREATE ROLE tn_tenant NOLOGIN;
GRANT USAGE ON SEQUENCE queue."q_tn_a$seq" TO tn_tenant;
GRANT SELECT, INSERT, UPDATE, DELETE ON queue.q_tn_a TO tn_tenant;
GRANT INSERT ON queue.a_tn_a TO tn_tenant;
SELECT queue.grant('tn_a', 'tn_tenant', 'all');

/* ---------------------------------------------------- forged ids */

SELECT queue.enqueue('tn_b', '{"secret": "b"}') AS b_job \gset
SET ROLE tn_tenant;
SELECT throws_ok(format($$INSERT INTO queue.q_tn_a (id, rank, run_at, enqueued_at, state, priority, attempt, payload)
                          VALUES (%s, 1, now(), now(), 'ready', 0, 0, '{}')$$, :b_job),
                 '23514', NULL,
                 'a row inserted into tn_a''s table with an id of tn_b: 23514');
SELECT queue.enqueue('tn_a', '{"n": 1}') AS a_job \gset
SELECT throws_ok(format($$UPDATE queue.q_tn_a SET id = %s WHERE id = %s$$,
                        (:a_job / 1000000 + 1000) * 1000000 + :b_qno, :a_job),
                 '23514', NULL,
                 'a row of tn_a''s table updated to an id of tn_b: 23514');
SELECT lives_ok(format($$INSERT INTO queue.q_tn_a (id, rank, run_at, enqueued_at, state, priority, attempt, payload)
                         VALUES (%s, 1, now(), now(), 'ready', 0, 0, '{}')$$, 999000000 + :a_qno),
                'a row with an id of its own queue still goes in (the CHECK names the queue, nothing else)');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM queue.jobs WHERE queue = 'tn_b'), 1,
          'queue.jobs lists only tn_b''s own job as tn_b''s');
SELECT is((SELECT array_agg(conname::text ORDER BY conname) FROM pg_constraint
            WHERE contype = 'c' AND conrelid IN ('queue.q_tn_a'::regclass, 'queue.q_tn_b'::regclass)),
          ARRAY['q_tn_a$id', 'q_tn_b$id'],
          'each queue''s table has the CHECK on its ids');
SELECT is((SELECT count(*)::int FROM queue.claim('tn_a', 10)), 2,
          'claims of tn_a take its jobs, the one enqueued and the one inserted');

/* ---------------------------------------------------- queue._held() */

CREATE FUNCTION pg_temp.take_b() RETURNS bigint LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp AS $$
    SELECT id FROM queue.claim('tn_b')
$$;
GRANT EXECUTE ON FUNCTION pg_temp.take_b() TO tn_tenant;
SET ROLE tn_tenant;
SELECT is(pg_temp.take_b(), :'b_job'::bigint,
          'a SECURITY DEFINER function claims tn_b''s job for its caller''s transaction');
SELECT is((SELECT count(*)::int FROM queue._held() h WHERE h.id = :b_job), 0,
          'queue._held() does not show the caller the tn_b job it may not read');
SELECT is((SELECT count(*)::int FROM queue._held() h WHERE h.payload ? 'secret'), 0,
          'nor its payload');
RESET ROLE;
SELECT is((SELECT h.payload FROM queue._held() h WHERE h.id = :b_job), '{"secret": "b"}'::jsonb,
          'the superuser sees the held tn_b job');
SELECT is((SELECT count(*)::int FROM queue.stats WHERE queue = 'tn_b' AND running = 1), 1,
          'queue.stats counts it as running');

/* ---------------------------------------------------- invalidations */

SELECT hasnt_function('queue', '_invalidate', ARRAY[]::name[],
                      'queue._invalidate(), which anyone could call in a loop, is gone');
SET ROLE tn_tenant;
SELECT throws_ok($$SELECT queue._config_changed()$$, '0A000', NULL,
                 'the trigger function that makes backends reread queue_config cannot be called');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
