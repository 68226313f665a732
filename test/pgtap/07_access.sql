-- 07_access.sql: privileges per queue (queue.grant).  A role with every
-- privilege on queue ac_a and none on ac_b tries each door to ac_b and
-- gets 42501, sees none of ac_b's rows, and learns nothing of its jobs
-- from an error; on ac_a it does everything without a single privilege on
-- the queue's tables.  Then role membership, a role with no grant at all,
-- delegated creation, revoking, DROP ROLE and DROP OWNED, bad arguments.
--
-- The whole file is one transaction, rolled back at the end.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(135);

SELECT queue.create('ac_a');
SELECT queue.create('ac_b', max_attempts => 1);
SELECT qno AS b_qno FROM queue.queue_config WHERE name = 'ac_b' \gset
CREATE ROLE ac_alice NOLOGIN;
CREATE ROLE ac_member NOLOGIN IN ROLE ac_alice;
CREATE ROLE ac_noinherit NOLOGIN NOINHERIT IN ROLE ac_alice;
CREATE ROLE ac_nobody NOLOGIN;
CREATE ROLE ac_lead NOLOGIN;

-- ac_b: a ready job, a running one, a dead one, a done one, all secret
SELECT queue.enqueue('ac_b', '{"secret": "done"}') AS b_done \gset
SELECT queue.complete(id) FROM queue.claim('ac_b');
SELECT queue.enqueue('ac_b', '{"secret": "dead"}') AS b_dead \gset
SELECT queue.fail(id, 'secret error') FROM queue.claim('ac_b');
SELECT queue.enqueue('ac_b', '{"secret": "running"}') AS b_running \gset
SELECT count(*) FROM queue.claim('ac_b');
SELECT queue.enqueue('ac_b', '{"secret": "ready"}', dedup_key => 'secret-key') AS b_ready \gset

/* -------------------------------------------------------- the API */

SELECT has_function('queue', 'grant', ARRAY['text', 'regrole', 'text']);
SELECT function_returns('queue', 'grant', ARRAY['text', 'regrole', 'text'], 'void');
SELECT has_function('queue', 'revoke', ARRAY['text', 'regrole', 'text']);
SELECT function_returns('queue', 'revoke', ARRAY['text', 'regrole', 'text'], 'void');
SELECT has_view('queue', 'grants', 'view queue.grants');
SELECT columns_are('queue', 'grants', ARRAY['queue', 'role', 'privilege']);

SELECT lives_ok($$SELECT queue.grant('ac_a', 'ac_alice', 'all')$$, 'the superuser grants all on ac_a');
SELECT set_eq($$SELECT privilege FROM queue.grants WHERE queue = 'ac_a' AND role = 'ac_alice'::regrole$$,
              ARRAY['produce', 'consume', 'read', 'manage'],
              'all is the four privileges, each a row of queue.grants');
SELECT lives_ok($$SELECT queue.grant('ac_a', 'ac_alice', 'read')$$, 'granting again changes nothing');
SELECT is((SELECT count(*)::int FROM queue.grants WHERE queue = 'ac_a'), 4, 'still four rows');

/* ------------------------------------------ every door to ac_b: 42501 */

-- The message, detail and hint of the error sql raises (NULL: none).
CREATE FUNCTION pg_temp.error_text(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    m text; d text; h text;
BEGIN
    EXECUTE sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN concat_ws(' | ', m, d, h);
END
$$;

SET ROLE ac_alice;
SELECT throws_ok($$SELECT queue.enqueue('ac_b', '{}')$$, '42501', NULL, 'enqueue into ac_b: 42501');
SELECT throws_ok($$SELECT queue.enqueue_batch('ac_b', ARRAY['{}']::jsonb[])$$, '42501', NULL,
                 'enqueue_batch into ac_b: 42501');
SELECT throws_ok($$SELECT * FROM queue.claim('ac_b')$$, '42501', NULL, 'claim from ac_b: 42501');
SELECT throws_ok($$SELECT * FROM queue.claim('ac_b', 10, wait => '10 seconds')$$, '42501', NULL,
                 'claim(wait =>) from ac_b: 42501, at once');
SELECT throws_ok(format('SELECT queue.complete(%s)', :b_running), '42501', NULL,
                 'complete of ac_b''s running job: 42501');
SELECT throws_ok(format('SELECT queue.complete(%s, 1)', :b_running), '42501', NULL,
                 'complete with a token: 42501, not false');
SELECT throws_ok(format('SELECT queue.complete(ARRAY[%s]::bigint[])', :b_running), '42501', NULL,
                 'complete(ids[]): 42501');
SELECT throws_ok(format('SELECT queue.fail(%s, $e$x$e$)', :b_running), '42501', NULL, 'fail: 42501');
SELECT throws_ok(format('SELECT queue.fail(%s, $e$x$e$, attempt => 1)', :b_running), '42501', NULL,
                 'fail with a token: 42501, not NULL');
SELECT throws_ok(format('SELECT queue.extend(%s, $e$1 hour$e$)', :b_running), '42501', NULL, 'extend: 42501');
SELECT throws_ok(format('SELECT queue.release(%s)', :b_running), '42501', NULL, 'release: 42501');
SELECT throws_ok(format('SELECT * FROM queue.history(%s)', :b_ready), '42501', NULL, 'history: 42501');
SELECT throws_ok(format('SELECT * FROM queue.history(%s)', :b_done), '42501', NULL,
                 'history of a finished job: 42501');
SELECT throws_ok(format('SELECT queue.reschedule(%s, now())', :b_ready), '42501', NULL, 'reschedule: 42501');
SELECT throws_ok(format('SELECT queue.cancel(%s)', :b_ready), '42501', NULL, 'cancel: 42501');
SELECT throws_ok(format('SELECT queue.retry(%s)', :b_dead), '42501', NULL, 'retry: 42501');
SELECT throws_ok($$SELECT queue.purge('ac_b')$$, '42501', NULL, 'purge: 42501');
SELECT throws_ok($$SELECT queue.purge('ac_b', '{"secret": "ready"}')$$, '42501', NULL, 'purge with a filter: 42501');
SELECT throws_ok($$SELECT queue.pause('ac_b')$$, '42501', NULL, 'pause: 42501');
SELECT throws_ok($$SELECT queue.resume('ac_b')$$, '42501', NULL, 'resume: 42501');
SELECT throws_ok($$SELECT queue.alter('ac_b', max_attempts => 9)$$, '42501', NULL, 'alter: 42501');
SELECT throws_ok($$SELECT queue.drop('ac_b')$$, '42501', NULL, 'drop: 42501');
SELECT throws_ok($$SELECT queue.set_owner('ac_b', 'ac_alice')$$, '42501', NULL, 'set_owner: 42501');
SELECT throws_ok($$SELECT queue.grant('ac_b', 'ac_alice', 'read')$$, '42501', NULL, 'grant on ac_b: 42501');
SELECT throws_ok($$SELECT queue.revoke('ac_b', 'ac_alice', 'read')$$, '42501', NULL, 'revoke on ac_b: 42501');
SELECT throws_ok($$LISTEN queue_ac_b$$, '42501', NULL, 'LISTEN on ac_b''s channel: 42501');
SELECT lives_ok($$LISTEN queue_ac_a$$, 'LISTEN on ac_a''s channel');
SELECT throws_ok($$LISTEN queue_no_such_queue$$, '42501', NULL,
                 'nor on the channel of a queue not made yet (it would hear the queue once made)');
SELECT lives_ok($$LISTEN not_a_queue_channel$$, 'other channels are anyone''s');
UNLISTEN *;

-- the views show nothing of ac_b
SELECT is((SELECT count(*)::int FROM queue.queues WHERE queue = 'ac_b'), 0, 'queue.queues: no ac_b');
SELECT is((SELECT count(*)::int FROM queue.jobs WHERE queue = 'ac_b' OR payload ? 'secret'), 0,
          'queue.jobs: no job of ac_b');
SELECT is((SELECT count(*)::int FROM queue.archive WHERE queue = 'ac_b' OR payload ? 'secret'), 0,
          'queue.archive: no job of ac_b');
SELECT is((SELECT count(*)::int FROM queue.stats WHERE queue = 'ac_b'), 0, 'queue.stats: no ac_b');
SELECT is((SELECT count(*)::int FROM queue.grants WHERE queue <> 'ac_a'), 0, 'queue.grants: only ac_a''s');
SELECT is((SELECT count(*)::int FROM queue.queue_config), 0, 'queue_config: no row (alice owns no queue)');
-- a condition that would see every row it is asked about sees none of ac_b's
CREATE FUNCTION pg_temp.spy(p jsonb) RETURNS boolean LANGUAGE plpgsql COST 0.0001 AS $$
BEGIN
    IF p ? 'secret' THEN RAISE EXCEPTION 'spy saw %', p; END IF;
    RETURN true;
END
$$;
SELECT lives_ok($$SELECT count(*) FROM queue.jobs WHERE pg_temp.spy(payload)$$,
                'a cheap leaky condition on queue.jobs never sees a row of ac_b (security barrier)');
SELECT lives_ok($$SELECT count(*) FROM queue.archive WHERE pg_temp.spy(payload)$$,
                'nor on queue.archive');

-- errors through a job id say nothing of its queue or its job
SELECT is_empty(format($q$
    SELECT t FROM (VALUES (pg_temp.error_text('SELECT queue.complete(%1$s)')),
                          (pg_temp.error_text('SELECT queue.fail(%1$s, ''x'')')),
                          (pg_temp.error_text('SELECT * FROM queue.history(%2$s)')),
                          (pg_temp.error_text('SELECT * FROM queue.history(%3$s)')),
                          (pg_temp.error_text('SELECT queue.cancel(%2$s)')),
                          (pg_temp.error_text('SELECT queue.retry(%4$s)')),
                          (pg_temp.error_text('SELECT queue.reschedule(%2$s, now())'))) e(t)
     WHERE t IS NULL OR t ~ 'ac_b|secret|running|ready|dead|done|finished'$q$,
    :b_running, :b_ready, :b_done, :b_dead),
    'errors through ac_b''s job ids name neither the queue nor the job''s state, payload or error');
SELECT matches(pg_temp.error_text(format('SELECT queue.complete(%s)', :b_running)),
               '^permission denied for job \d+ \| Role "ac_alice" lacks the consume privilege',
               'the error names the job and the privilege the role lacks');
SELECT matches(pg_temp.error_text($$SELECT queue.enqueue('ac_b', '{}')$$),
               '^permission denied for queue "ac_b" \| Role "ac_alice" lacks the produce privilege on it\. \| .*queue\.grant\(''ac_b'', ''ac_alice'', ''produce''\)',
               'through a queue name, the error names the queue, the privilege and the grant that gives it');

-- the internal functions refuse too
SELECT throws_ok(format('SELECT * FROM queue._queue_stats(%s)', :b_qno), '42501', NULL, '_queue_stats: 42501');
SELECT is((SELECT count(*) FROM queue._queue_jobs(:b_qno)), 0::bigint, '_queue_jobs of ac_b: no rows');
SELECT is((SELECT count(*) FROM queue._queue_archive(:b_qno)), 0::bigint, '_queue_archive of ac_b: no rows');
SELECT throws_ok(format($$SELECT queue._archive_next(c, now()) FROM queue.queue_config c WHERE c.qno = %s$$, :b_qno),
                 '42501', NULL, '_archive_next is not executable');
SELECT throws_ok(format('SELECT queue._recount(%s)', :b_qno), '42501', NULL, '_recount: 42501');
SELECT throws_ok(format('SELECT queue._reset_cursor(%s)', :b_qno), '42501', NULL, '_reset_cursor: 42501');
SELECT throws_ok(format($$SELECT queue._count(%s, 'ready', 'dead', 1)$$, :b_qno), '42501', NULL, '_count: 42501');
SELECT throws_ok('SELECT * FROM queue._queue_stats(999997)', '42704', NULL, '_queue_stats of no queue: 42704');
SELECT throws_ok(format($$SELECT * FROM queue._tick_queue(ROW(%s, 'ac_b', 1, '1 s', '1 s', '1 s', '1 s', NULL,
                                 'block', false, now(), 0, '{}', NULL, '1 s', 1)::queue.queue_config)$$, :b_qno),
                 '42501', NULL, '_tick_queue of a forged ac_b row: 42501');
SELECT throws_ok($$SELECT * FROM queue._cancel(1)$$, '42501', NULL,
                 'the internal function behind cancel is not executable');
SELECT is(queue._may(:b_qno, 'read'), false, '_may says no');

/* ------------------------------------ ac_a: everything, without table rights */

SELECT is(has_table_privilege('queue.q_ac_a', 'SELECT') OR has_table_privilege('queue.q_ac_a', 'INSERT')
          OR has_table_privilege('queue.q_ac_a', 'UPDATE') OR has_table_privilege('queue.q_ac_a', 'DELETE')
          OR has_table_privilege('queue.a_ac_a', 'INSERT') OR has_table_privilege('queue.s_ac_a', 'UPDATE')
          OR has_sequence_privilege('queue."q_ac_a$seq"', 'USAGE'), false,
          'alice has no privilege on ac_a''s tables or sequence');
SELECT throws_ok($$INSERT INTO queue.q_ac_a (id, rank, run_at, enqueued_at, state, priority, attempt, payload)
                   VALUES (1, 1, now(), now(), 'ready', 0, 0, '{}')$$, '42501', NULL,
                 'so she cannot forge a row');
SELECT throws_ok($$LOCK TABLE queue.q_ac_a IN SHARE MODE$$, '42501', NULL,
                 'nor lock the table (and stall its upkeep)');
SELECT queue.enqueue('ac_a', '{"n": 1}') AS a1 \gset
SELECT queue.enqueue('ac_a', '{"n": 2}') AS a2 \gset
SELECT queue.enqueue('ac_a', '{"n": 3}', run_at => now() + interval '1 hour') AS a3 \gset
SELECT is((SELECT count(*)::int FROM queue.enqueue_batch('ac_a', ARRAY['{"n": 4}', '{"n": 5}']::jsonb[])), 2,
          'alice enqueues a batch');
CREATE TEMP TABLE ac_claimed AS SELECT id FROM queue.claim('ac_a', 10);
SELECT is((SELECT count(*)::int FROM ac_claimed), 4, 'claims a batch of the four due jobs');
SELECT min(id) AS a4, max(id) AS a5 FROM ac_claimed WHERE id NOT IN (:a1, :a2) \gset
SELECT ok(queue.complete(:a1), 'completes one');
SELECT is(queue.fail(:a2, 'boom', retry_in => '1 hour'), 'retry', 'fails one');
SELECT ok(queue.extend(:a4, '1 hour') IS NOT NULL, 'extends one');
SELECT ok(queue.release(:a5), 'releases one');
SELECT is((SELECT count(*)::int FROM queue.history(:a2) WHERE event = 'failed'), 1, 'reads a job''s history');
SELECT lives_ok(format('SELECT queue.reschedule(%s, now() + interval ''2 hours'')', :a3), 'reschedules');
SELECT lives_ok(format('SELECT queue.cancel(%s)', :a3), 'cancels');
SELECT lives_ok($$SELECT queue.pause('ac_a'); SELECT queue.resume('ac_a')$$, 'pauses and resumes');
SELECT lives_ok($$SELECT queue.alter('ac_a', max_attempts => 7)$$, 'alters');
SELECT is((SELECT max_attempts FROM queue.queues WHERE queue = 'ac_a'), 7, 'and sees the change');
SELECT is((SELECT count(*)::int FROM queue.stats WHERE queue = 'ac_a'), 1, 'reads ac_a''s stats');
SELECT is((SELECT count(*)::int FROM queue.archive WHERE queue = 'ac_a'), 2, 'and its archive');
SELECT ok(queue.purge('ac_a') >= 1, 'purges');
SELECT queue.enqueue('ac_a', '{"n": 6}') AS a6 \gset
SELECT is((SELECT id FROM queue.claim('ac_a')), :'a6'::bigint, 'claims in a transaction block');
SELECT is((SELECT state FROM queue.jobs WHERE id = :a6), 'running',
          'and sees the job it holds as running');
SELECT throws_ok($$SELECT queue.drop('ac_a')$$, '42501', NULL, 'manage is not ownership: no drop');
SELECT throws_ok($$SELECT queue.grant('ac_a', 'ac_nobody', 'read')$$, '42501', NULL, 'nor grant');
RESET ROLE;

/* ------------------------------------------------------ role membership */

SET ROLE ac_member;
SELECT lives_ok($$SELECT queue.enqueue('ac_a', '{}')$$, 'a member of alice has her privileges');
SELECT is((SELECT count(*)::int FROM queue.queues WHERE queue = 'ac_a'), 1, 'and sees ac_a');
RESET ROLE;
SET ROLE ac_noinherit;
SELECT throws_ok($$SELECT queue.enqueue('ac_a', '{}')$$, '42501', NULL,
                 'a member that does not inherit has them only after SET ROLE');
SET ROLE ac_alice;
SELECT lives_ok($$SELECT queue.enqueue('ac_a', '{}')$$, 'SET ROLE alice: it has');
RESET ROLE;

/* ------------------------------------------------ a role with no grant */

SET ROLE ac_nobody;
SELECT is((SELECT count(*)::int FROM queue.queues) + (SELECT count(*)::int FROM queue.stats)
          + (SELECT count(*)::int FROM queue.jobs) + (SELECT count(*)::int FROM queue.archive)
          + (SELECT count(*)::int FROM queue.grants) + (SELECT count(*)::int FROM queue.queue_config), 0,
          'a role with no grant sees no queue, job, count or grant');
SELECT throws_ok($$SELECT queue.create('ac_nobodys')$$, '42501', NULL, 'nor creates a queue');
SELECT throws_ok($$SELECT queue.enqueue('ac_a', '{}')$$, '42501', NULL, 'nor enqueues');
SELECT throws_ok($$SELECT * FROM queue.claim('ac_a')$$, '42501', NULL, 'nor claims');
SELECT is_empty($$SELECT * FROM queue.tick()$$, 'nor runs the upkeep (tick) of a queue it does not own');
RESET ROLE;

/* ---------------------------------------------------------- ownership */

SELECT lives_ok($$SELECT queue.set_owner('ac_a', 'ac_lead')$$, 'the superuser gives ac_a to lead');
SET ROLE ac_lead;
SELECT lives_ok($$SELECT queue.grant('ac_a', 'ac_nobody', 'read')$$, 'its owner grants on it');
SELECT is((SELECT count(*)::int FROM queue.grants WHERE queue = 'ac_a'), 5, 'and sees all its grants');
SELECT lives_ok($$SELECT queue.revoke('ac_a', 'ac_nobody', 'read')$$, 'and revokes');
SELECT lives_ok($$SELECT queue.enqueue('ac_a', '{}')$$, 'its owner has every privilege on it');
SELECT throws_ok($$SELECT queue.create('ac_leads')$$, '42501', NULL, 'creating needs EXECUTE on queue.create');
RESET ROLE;
SELECT set_eq($$SELECT privilege FROM queue.grants WHERE queue = 'ac_a' AND role = 'ac_alice'::regrole$$,
              ARRAY['produce', 'consume', 'read', 'manage'],
              'grants survive set_owner and alter');
GRANT EXECUTE ON FUNCTION queue.create TO ac_lead;
SET ROLE ac_lead;
SELECT lives_ok($$SELECT queue.create('ac_leads', max_running => 2)$$,
                'granted EXECUTE on queue.create, lead creates a queue');
SELECT is((SELECT count(*)::int FROM queue.queues WHERE queue = 'ac_leads'), 1, 'sees it');
SELECT lives_ok($$SELECT queue.create('ac_b', if_not_exists => true)$$,
                'if_not_exists on a queue of someone else''s changes nothing');
SELECT throws_ok($$SELECT queue.enqueue('ac_b', '{}')$$, '42501', NULL, 'and gives lead nothing of it');
SELECT lives_ok($$SELECT queue.grant('ac_leads', 'ac_alice', 'produce')$$, 'grants on its queue');
SELECT lives_ok($$SELECT queue.alter('ac_leads', max_running => 3)$$, 'alters it');
SELECT throws_ok($$SELECT queue.set_owner('ac_leads', 'ac_alice')$$, '42501', NULL,
                 'cannot hand it to a role it is not a member of');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM pg_class
            WHERE relnamespace = 'queue'::regnamespace AND relname ~ '^[qsla]_ac_leads'
              AND relowner <> 'ac_lead'::regrole), 0,
          'lead owns every table of its queue');
SET ROLE ac_alice;
SELECT lives_ok($$SELECT queue.enqueue('ac_leads', '{}')$$, 'alice produces into lead''s queue');
RESET ROLE;
SET ROLE ac_lead;
SELECT lives_ok($$SELECT queue.drop('ac_leads')$$, 'lead drops its queue');
RESET ROLE;

/* --------------------- an owner's code runs as the owner, and leaves nothing */

-- a trigger of lead's on its queue's table logs who runs it and sets
-- search_path for the rest of the session, if it can
GRANT CREATE ON SCHEMA public TO ac_lead;
SELECT queue.create('ac_c');
SELECT queue.set_owner('ac_c', 'ac_lead');
SET ROLE ac_lead;
CREATE TABLE public.ac_log (who name);
CREATE FUNCTION public.ac_sets_path() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.ac_log VALUES (current_user);
    PERFORM pg_catalog.set_config('search_path', 'public, pg_catalog', false);
    RETURN NULL;
END
$$;
CREATE TRIGGER ac_sets_path AFTER INSERT ON queue.q_ac_c FOR EACH ROW EXECUTE FUNCTION public.ac_sets_path();
RESET ROLE;
SELECT current_setting('search_path') AS path_before \gset
SELECT queue.enqueue('ac_c', '{}') AS c1 \gset
SELECT is(current_setting('search_path'), :'path_before',
          'a superuser''s enqueue ran the owner''s trigger, and its setting was undone');
SELECT is((SELECT count(*)::int FROM queue.claim('ac_c')), 1, 'the superuser claims the job, held in its transaction');
SELECT is((SELECT count(*)::int FROM queue.history(:b_ready)), 1,
          'a management call on a superuser''s queue writes the held job back (the trigger runs again)');
SELECT is(current_setting('search_path'), :'path_before', 'and that setting was undone too');
SELECT is((SELECT array_agg(DISTINCT who)::text FROM public.ac_log), '{ac_lead}',
          'the trigger ran twice, as its owner each time, never as the superuser');

/* ---------------------- an owner's rows cannot pose as another queue's jobs */

-- lead drops its table's CHECK on ids and writes a job with an id of
-- ac_b, and a lease that names ac_b's ready job
SET ROLE ac_lead;
DROP TRIGGER ac_sets_path ON queue.q_ac_c;
ALTER TABLE queue.q_ac_c DROP CONSTRAINT "q_ac_c$id";
INSERT INTO queue.q_ac_c (id, rank, run_at, enqueued_at, state, priority, attempt, payload)
VALUES (999000000 + :b_qno, 1, now(), now(), 'ready', 100, 0, '{"fake": true}');
INSERT INTO queue.l_ac_c (lease, lease_until, claimed_at, ids, attempts)
VALUES (998000000 + :b_qno, now() + interval '10 years', now(), ARRAY[:b_ready]::bigint[], '{0}');
SELECT throws_ok($$UPDATE queue.queue_config SET max_attempts = 0 WHERE name = 'ac_c'$$, '23514', NULL,
                 'its owner may update its queue''s settings by hand, but only to what queue.alter allows');
SELECT throws_ok($$UPDATE queue.queue_config SET retention = '-5 days' WHERE name = 'ac_c'$$, '23514', NULL,
                 'a negative retention neither');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM queue.jobs WHERE queue = 'ac_b' AND payload ? 'fake'), 0,
          'queue.jobs does not list the row of ac_c''s table as a job of ac_b');
SELECT is((SELECT state FROM queue.jobs WHERE id = :b_ready), 'ready',
          'and ac_c''s lease table cannot make ac_b''s job look running');
SELECT throws_ok($$SELECT * FROM queue.claim('ac_c', 10)$$, 'XX001', NULL,
                 'a claim that finds such a row refuses it, rather than hand out another queue''s id');

/* ------------------------------------------ revoking, DROP ROLE, DROP OWNED */

SELECT lives_ok($$SELECT queue.revoke('ac_a', 'ac_alice', 'consume')$$, 'revoke consume from alice');
SET ROLE ac_alice;
SELECT throws_ok($$SELECT * FROM queue.claim('ac_a')$$, '42501', NULL, 'she claims no more');
SELECT lives_ok($$SELECT queue.enqueue('ac_a', '{}')$$, 'but still produces');
RESET ROLE;
SELECT throws_ok($$DROP ROLE ac_alice$$, '2BP01', NULL, 'DROP ROLE is refused while the role has grants');
SELECT lives_ok($$DROP OWNED BY ac_alice$$, 'DROP OWNED BY revokes them');
SELECT is((SELECT count(*)::int FROM queue.grants WHERE role = 'ac_alice'::regrole), 0, 'they are gone');
SELECT lives_ok($$DROP ROLE ac_member, ac_noinherit, ac_alice$$, 'then the role can be dropped');
SELECT is((SELECT count(*)::int FROM pg_shdepend WHERE deptype = 'a'
             AND objid = 'queue.queue_grants'::regclass AND refobjid NOT IN (SELECT oid FROM pg_roles)), 0,
          'no dependency is left on a dropped role');

/* ---------------------------------------------------------- bad input */

SELECT throws_ok($$SELECT queue.grant('ac_a', 'ac_nobody', 'write')$$, '22023', NULL, 'an unknown privilege: 22023');
SELECT throws_ok($$SELECT queue.grant('ac_a', 'ac_nobody', NULL)$$, '22004', NULL, 'a NULL privilege: 22004');
SELECT throws_ok($$SELECT queue.grant('ac_a', NULL, 'read')$$, '22004', NULL, 'a NULL role: 22004');
SELECT throws_ok($$SELECT queue.grant(NULL, 'ac_nobody', 'read')$$, '22004', NULL, 'a NULL queue: 22004');
SELECT throws_ok($$SELECT queue.grant('ac_nope', 'ac_nobody', 'read')$$, '42704', NULL, 'an unknown queue: 42704');
SELECT throws_ok($$SELECT queue.grant('ac_a', 'ac_no_such_role', 'read')$$, '42704', NULL, 'an unknown role: 42704');
SELECT throws_ok($$SELECT queue.grant('Robert''); DROP TABLE queue.queue_grants; --', 'ac_nobody', 'read')$$,
                 '42602', NULL, 'a queue name that tries to inject SQL: 42602');
SELECT is((SELECT count(*)::int FROM queue.grants WHERE role = 'ac_nobody'::regrole), 0,
          'and none of these granted anything');

SELECT * FROM finish();
ROLLBACK;
