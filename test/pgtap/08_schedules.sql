-- 08_schedules.sql: the API of periodic jobs, and who may do what with
-- schedules.  Changing a schedule needs manage on its queue (making one
-- produce too: its ticks are jobs); a role that
-- may read the queue sees its schedules but may not change them, and to
-- a role with no privilege on it they do not exist.  queue.tick() by a
-- role fires only the schedules of queues it may produce into.
--
-- The whole file is one transaction, rolled back at the end (the worker
-- never sees these schedules).
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(38);

SELECT has_function('queue', 'schedule',
    ARRAY['text', 'text', 'text', 'jsonb', 'interval', 'text', 'integer', 'text', 'text', 'text']);
SELECT function_returns('queue', 'schedule',
    ARRAY['text', 'text', 'text', 'jsonb', 'interval', 'text', 'integer', 'text', 'text', 'text'], 'timestamp with time zone');
SELECT function_returns('queue', 'unschedule', ARRAY['text', 'boolean'], 'boolean');
SELECT function_returns('queue', 'pause_schedule', ARRAY['text'], 'void');
SELECT function_returns('queue', 'resume_schedule', ARRAY['text'], 'timestamp with time zone');
SELECT function_returns('queue', 'cron_ticks', ARRAY['text', 'text', 'timestamp with time zone', 'integer'],
    'setof timestamp with time zone');
SELECT has_view('queue', 'schedules', 'view queue.schedules');
SELECT columns_are('queue', 'schedules', ARRAY['name', 'queue', 'cron', 'every', 'timezone', 'payload',
    'next_run_at', 'last_run_at', 'last_job_id', 'paused', 'priority', 'group_key', 'overlap', 'catch_up',
    'overlap_skips', 'retry_at', 'last_error', 'created_at']);
SELECT is((SELECT count(*)::int FROM information_schema.role_table_grants
            WHERE table_schema = 'queue' AND table_name = 'queue_schedules' AND grantee = 'PUBLIC'), 0,
          'nobody but its owner has privileges on queue.queue_schedules');

SELECT queue.create('sc_a');
SELECT queue.create('sc_b');
CREATE ROLE sc_manager NOLOGIN;
CREATE ROLE sc_reader NOLOGIN;
CREATE ROLE sc_producer NOLOGIN;
CREATE ROLE sc_nobody NOLOGIN;
SELECT queue.grant('sc_a', 'sc_manager', 'manage');
CREATE ROLE sc_manage_only NOLOGIN;
SELECT queue.grant('sc_a', 'sc_manage_only', 'manage');
SELECT queue.grant('sc_a', 'sc_manager', 'produce');
SELECT queue.grant('sc_a', 'sc_reader', 'read');
SELECT queue.grant('sc_a', 'sc_producer', 'produce');
SELECT queue.schedule('sc-b', 'sc_b', '0 3 * * *', '{"secret": 1}');

/* ------------------------------------------------ a role with manage */

SET LOCAL ROLE sc_manage_only;
SELECT throws_ok($$SELECT queue.schedule('sc-m', 'sc_a', every => '1 second', payload => '{"x": 1}')$$, '42501',
    'permission denied for queue "sc_a"', 'manage alone may not make a schedule: its ticks enqueue');
RESET ROLE;
SELECT queue.schedule('sc-m', 'sc_a', every => '1 hour');
SET LOCAL ROLE sc_manage_only;
SELECT lives_ok($$SELECT queue.pause_schedule('sc-m')$$, 'but may pause one');
RESET ROLE;
SELECT queue.unschedule('sc-m');

SET LOCAL ROLE sc_manager;
SELECT lives_ok($$SELECT queue.schedule('sc-a', 'sc_a', every => '1 hour')$$, 'manage and produce may schedule');
SELECT lives_ok($$SELECT queue.pause_schedule('sc-a')$$, 'and pause');
SELECT ok((SELECT paused FROM queue.schedules WHERE name = 'sc-a'), 'paused');
SELECT lives_ok($$SELECT queue.resume_schedule('sc-a')$$, 'and resume');
SELECT throws_ok($$SELECT queue.schedule('sc-b2', 'sc_b', every => '1 hour')$$, '42501', NULL,
    'not on a queue it may not manage');
SELECT throws_ok($$SELECT queue.schedule('sc-b', 'sc_a', every => '1 hour')$$, '42501',
    'schedule "sc-b" belongs to a queue the role may not manage',
    'nor take over the name of a schedule of such a queue');
SELECT throws_ok($$SELECT queue.unschedule('sc-b')$$, '42704', 'schedule "sc-b" does not exist',
    'to it a schedule of a queue it has no privilege on does not exist');
SELECT is((SELECT queue.unschedule('sc-b', if_exists => true)), false, 'if_exists: false');
SELECT is((SELECT array_agg(name)::text FROM queue.schedules), '{sc-a}', 'it sees only the schedules of sc_a');
SELECT throws_ok($$UPDATE queue.queue_schedules SET paused = true$$, '42501', NULL,
    'it may not touch the table');
RESET ROLE;

/* --------------------------------------------- read, produce, nobody */

SET LOCAL ROLE sc_reader;
SELECT is((SELECT array_agg(name)::text FROM queue.schedules), '{sc-a}', 'read sees the schedules of sc_a');
SELECT throws_ok($$SELECT queue.pause_schedule('sc-a')$$, '42501', 'permission denied for schedule "sc-a"',
    'but may not pause them');
SELECT throws_ok($$SELECT queue.schedule('sc-a', 'sc_a', every => '1 hour')$$, '42501', NULL,
    'nor replace them');
RESET ROLE;
SET LOCAL ROLE sc_nobody;
SELECT is((SELECT count(*)::int FROM queue.schedules), 0, 'a role with no privilege sees no schedule');
SELECT throws_ok($$SELECT queue.unschedule('sc-a')$$, '42704', NULL, 'and none exists to it');
SELECT throws_ok($$SELECT queue.schedule('x', 'sc_a', every => '1 hour')$$, '42501', NULL, 'nor may it schedule');
RESET ROLE;

-- tick() by a role fires the due schedules of the queues it may produce into
UPDATE queue.queue_schedules SET next_run_at = now() - interval '1 second';
SET LOCAL ROLE sc_nobody;
SELECT is((SELECT queue._fire_schedules()), 0::bigint, 'a role that may produce nowhere fires nothing');
RESET ROLE;
SET LOCAL ROLE sc_producer;
SELECT is((SELECT queue._fire_schedules()), 1::bigint, 'produce on sc_a fires the schedule of sc_a');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM queue.jobs WHERE queue = 'sc_a'), 1, 'its job is in sc_a');
SELECT is((SELECT count(*)::int FROM queue.jobs WHERE queue = 'sc_b'), 0, 'and sc_b''s schedule did not fire');
SELECT is((SELECT queue._fire_schedules()), 1::bigint, 'a superuser fires that one');
SELECT is((SELECT payload FROM queue.jobs WHERE queue = 'sc_b'), '{"secret": 1}'::jsonb, 'with its payload');

/* --------------------------------------------------- the owner, drop */

SELECT queue.set_owner('sc_b', 'sc_nobody');
SET LOCAL ROLE sc_nobody;
SELECT lives_ok($$SELECT queue.pause_schedule('sc-b')$$, 'the owner of a queue manages its schedules');
RESET ROLE;
SELECT lives_ok($$SELECT queue.drop('sc_b')$$, 'the queue is dropped');
SELECT is((SELECT count(*)::int FROM queue.queue_schedules WHERE name = 'sc-b'), 0, 'with its schedules');
SELECT is((SELECT count(*)::int FROM queue.queue_schedules WHERE name = 'sc-a'), 1, 'the others stay');
SELECT lives_ok($$SELECT queue.unschedule('sc-a')$$, 'unschedule');

SELECT * FROM finish();
ROLLBACK;
