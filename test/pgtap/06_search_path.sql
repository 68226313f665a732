-- 06_search_path.sql: objects an attacker made in schema public are never
-- called by the extension, also when a superuser uses the API with public
-- first in search_path.
--
-- A role that may create objects in public makes functions now() and
-- jsonb_typeof(jsonb), operators = and @> on jsonb, = on text and bigint,
-- and tables named like the extension's (queue_config, q_sp, _job).  Each
-- of its functions raises an error, so any call of one fails the call of
-- the API that made it.  Every SECURITY DEFINER function of the extension
-- pins search_path, and the rest either pin it too or are C functions
-- whose statements run with a search_path of pg_catalog only
-- (src/catalog/spi.c); the views were parsed when they were made.
--
-- The whole file is one transaction, rolled back at the end.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(35);

CREATE ROLE sp_attacker NOLOGIN;
GRANT CREATE ON SCHEMA public TO sp_attacker;
SET ROLE sp_attacker;
CREATE FUNCTION public.sp_trap() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'an attacker''s object in public was called';
END
$$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.sp_trap();
    RETURN NULL;
END
$$;
CREATE FUNCTION public.jsonb_typeof(jsonb) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.sp_trap();
    RETURN NULL;
END
$$;
CREATE FUNCTION public.sp_jsonb_op(jsonb, jsonb) RETURNS boolean LANGUAGE sql AS 'SELECT public.sp_trap()';
CREATE FUNCTION public.sp_text_op(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT public.sp_trap()';
CREATE FUNCTION public.sp_int8_op(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT public.sp_trap()';
CREATE OPERATOR public.= (LEFTARG = jsonb, RIGHTARG = jsonb, FUNCTION = public.sp_jsonb_op);
CREATE OPERATOR public.@> (LEFTARG = jsonb, RIGHTARG = jsonb, FUNCTION = public.sp_jsonb_op);
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.sp_text_op);
CREATE OPERATOR public.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.sp_int8_op);
CREATE TABLE public.queue_config (name text, qno int);
CREATE TABLE public.q_sp (id bigint);
CREATE TABLE public._job (id bigint);
RESET ROLE;

-- Run sql as a superuser whose search_path has public first (only for
-- sql: pgTAP's own functions would find the attacker's operators too).
CREATE FUNCTION pg_temp.victim(sql text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    saved text := pg_catalog.current_setting('search_path');
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'public, pg_catalog', true);
    EXECUTE sql;
    PERFORM pg_catalog.set_config('search_path', saved, true);
END
$$;

-- the attacker's objects are found first
SELECT throws_ok($$SELECT pg_temp.victim('SELECT now()')$$, 'P0001', 'an attacker''s object in public was called',
                 'with public first, now() is the attacker''s');
SELECT throws_ok($$SELECT pg_temp.victim('SELECT ''a''::text = ''a''::text')$$, 'P0001',
                 'an attacker''s object in public was called',
                 'with public first, = on text is the attacker''s');

SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.create('sp', max_running => 2)$v$)$$, 'create');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.create('sp_g', group_retry => 'requeue')$v$)$$, 'create with group_retry');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.alter('sp', max_attempts => 2)$v$)$$, 'alter');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.enqueue('sp', '{"a": 1}', dedup_key => 'k')$v$)$$, 'enqueue with dedup_key');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.enqueue('sp', '{"a": 1}', dedup_key => 'k')$v$)$$, 'enqueue of a taken dedup_key');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.enqueue_batch('sp', ARRAY['{"b": 1}', '{"b": 2}', '{"b": 3}']::jsonb[],
                                             run_at => pg_catalog.now() + interval '1 hour')$v$)$$,
                'enqueue_batch, scheduled');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.enqueue('sp_g', '{}', group_key => 'g') FROM generate_series(1, 2)$v$)$$,
                'enqueue into groups');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT pg_catalog.set_config('sp.id', (SELECT id FROM queue.claim('sp'))::text, true)$v$)$$, 'claim');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.extend(pg_catalog.current_setting('sp.id')::bigint, '1 minute')$v$)$$, 'extend');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.release(pg_catalog.current_setting('sp.id')::bigint)$v$)$$, 'release');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.fail(id, 'boom') FROM queue.claim('sp')$v$)$$, 'fail');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.fail(id, 'boom', retry_in => '0 s') FROM queue.claim('sp_g')$v$)$$,
                'fail of a group job (requeue)');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.retry(id) FROM queue.jobs WHERE queue OPERATOR(pg_catalog.=) 'sp' AND state OPERATOR(pg_catalog.=) 'dead'$v$)$$,
                'retry');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.complete(id) FROM queue.claim('sp', 10)$v$)$$, 'complete');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.history(id) FROM queue.archive WHERE queue OPERATOR(pg_catalog.=) 'sp'$v$)$$,
                'history');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.reschedule(id, pg_catalog.now()) FROM queue.jobs
                   WHERE queue OPERATOR(pg_catalog.=) 'sp' AND state OPERATOR(pg_catalog.=) 'scheduled'$v$)$$,
                'reschedule');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.cancel(id) FROM queue.jobs WHERE queue OPERATOR(pg_catalog.=) 'sp'$v$)$$, 'cancel');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.pause('sp'), queue.resume('sp')$v$)$$, 'pause and resume');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.purge('sp_g', '{"x": 1}')$v$)$$, 'purge with a filter');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT count(*) FROM queue.stats$v$)$$, 'queue.stats');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT count(*) FROM queue.jobs, queue.archive$v$)$$, 'queue.jobs and queue.archive');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.schedule('sp-s', 'sp', '0 9 * * *', '{"a": 1}',
                   timezone => 'Europe/Berlin', overlap => 'skip')$v$)$$, 'schedule');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.schedule('sp-s', 'sp', '0 9 * * *', '{"a": 2}',
                   timezone => 'Europe/Berlin', overlap => 'skip')$v$)$$, 'schedule, replacing');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.pause_schedule('sp-s'), queue.resume_schedule('sp-s')$v$)$$,
                'pause_schedule and resume_schedule');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT count(*) FROM queue.schedules, queue.cron_ticks('*/5 * * * *')$v$)$$,
                'queue.schedules and cron_ticks');
UPDATE queue.queue_schedules SET next_run_at = pg_catalog.now() - interval '1 minute' WHERE name = 'sp-s';
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT count(*) FROM queue.tick()$v$)$$, 'tick, firing a schedule');
SELECT is((SELECT last_error FROM queue.schedules WHERE name = 'sp-s'), NULL, 'the tick fired without an error');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.unschedule('sp-s')$v$)$$, 'unschedule');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.grant('sp', 'sp_attacker', 'all')$v$)$$, 'grant');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT count(*) FROM queue.grants, queue.queues$v$)$$,
                'queue.grants and queue.queues');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.revoke('sp', 'sp_attacker', 'read')$v$)$$, 'revoke');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.set_owner('sp_g', 'sp_attacker')$v$)$$, 'set_owner');
SELECT lives_ok($$SELECT pg_temp.victim($v$SELECT queue.drop('sp'), queue.drop('sp_g')$v$)$$, 'drop');

SELECT * FROM finish();
ROLLBACK;
