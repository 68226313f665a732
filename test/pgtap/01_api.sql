-- 01_api.sql: the SQL surface of queue as docs/api.md documents it.
--
-- Functions with their argument types, argument names (named calls must
-- read as api.md writes them) and return types; the views and the
-- composite type queue.claimed with their columns; pg_dump marking of the
-- catalog; pinned search_path of every plpgsql function.
BEGIN;
SELECT plan(108);

SELECT has_schema('queue');

/* ------------------------------------------------------------ functions */

-- Queues
SELECT has_function('queue', 'create',
    ARRAY['text', 'integer', 'interval', 'interval', 'interval', 'interval', 'boolean', 'integer', 'text',
          'integer', 'interval', 'integer']);
SELECT function_returns('queue', 'create',
    ARRAY['text', 'integer', 'interval', 'interval', 'interval', 'interval', 'boolean', 'integer', 'text',
          'integer', 'interval', 'integer'], 'void');
SELECT has_function('queue', 'alter',
    ARRAY['text', 'integer', 'interval', 'interval', 'interval', 'interval', 'integer', 'text', 'integer', 'interval',
          'integer']);
SELECT function_returns('queue', 'alter',
    ARRAY['text', 'integer', 'interval', 'interval', 'interval', 'interval', 'integer', 'text', 'integer', 'interval',
          'integer'], 'void');
SELECT has_function('queue', 'drop', ARRAY['text', 'boolean']);
SELECT function_returns('queue', 'drop', ARRAY['text', 'boolean'], 'void');
SELECT has_function('queue', 'pause', ARRAY['text']);
SELECT function_returns('queue', 'pause', ARRAY['text'], 'void');
SELECT has_function('queue', 'resume', ARRAY['text']);
SELECT function_returns('queue', 'resume', ARRAY['text'], 'void');

-- Producing
SELECT has_function('queue', 'enqueue',
    ARRAY['text', 'jsonb', 'timestamp with time zone', 'interval', 'integer', 'text', 'text']);
SELECT function_returns('queue', 'enqueue',
    ARRAY['text', 'jsonb', 'timestamp with time zone', 'interval', 'integer', 'text', 'text'], 'bigint');
SELECT has_function('queue', 'enqueue_batch',
    ARRAY['text', 'jsonb[]', 'timestamp with time zone', 'interval', 'integer', 'text']);
SELECT function_returns('queue', 'enqueue_batch',
    ARRAY['text', 'jsonb[]', 'timestamp with time zone', 'interval', 'integer', 'text'], 'setof bigint');
SELECT is((SELECT count(*)::int FROM pg_proc
            WHERE pronamespace = 'queue'::regnamespace AND proname = 'enqueue'),
          1, 'there is exactly one queue.enqueue (untyped literals must not be ambiguous)');

-- Consuming.  claim's options after the first two may come in any order
-- (api.md), so claim is checked by argument name and type below.
SELECT has_function('queue'::name, 'claim'::name);
SELECT function_returns('queue'::name, 'claim'::name, 'setof queue.claimed'::text);
SELECT has_function('queue', 'complete', ARRAY['bigint', 'integer']);
SELECT function_returns('queue', 'complete', ARRAY['bigint', 'integer'], 'boolean');
SELECT has_function('queue', 'complete', ARRAY['bigint[]']);
SELECT function_returns('queue', 'complete', ARRAY['bigint[]'], 'bigint');
SELECT has_function('queue', 'fail', ARRAY['bigint', 'text', 'interval', 'integer']);
SELECT function_returns('queue', 'fail', ARRAY['bigint', 'text', 'interval', 'integer'], 'text');
SELECT has_function('queue', 'extend', ARRAY['bigint', 'interval', 'integer']);
SELECT function_returns('queue', 'extend', ARRAY['bigint', 'interval', 'integer'], 'timestamp with time zone');
SELECT has_function('queue', 'release', ARRAY['bigint', 'timestamp with time zone', 'integer']);
SELECT function_returns('queue', 'release', ARRAY['bigint', 'timestamp with time zone', 'integer'], 'boolean');

-- Managing
SELECT has_function('queue', 'history', ARRAY['bigint']);
SELECT function_returns('queue', 'history', ARRAY['bigint'], 'setof record');
SELECT has_function('queue', 'reschedule', ARRAY['bigint', 'timestamp with time zone', 'integer']);
SELECT function_returns('queue', 'reschedule', ARRAY['bigint', 'timestamp with time zone', 'integer'], 'void');
SELECT has_function('queue', 'cancel', ARRAY['bigint']);
SELECT function_returns('queue', 'cancel', ARRAY['bigint'], 'void');
SELECT has_function('queue', 'retry', ARRAY['bigint']);
SELECT function_returns('queue', 'retry', ARRAY['bigint'], 'void');
SELECT has_function('queue', 'purge', ARRAY['text', 'jsonb']);
SELECT function_returns('queue', 'purge', ARRAY['text', 'jsonb'], 'bigint');
SELECT has_function('queue', 'tick', ARRAY[]::name[]);
SELECT function_returns('queue', 'tick', ARRAY[]::name[], 'setof record');

/*
 * Argument names and types, as api.md writes them: every documented
 * (function, argument name, type) must exist on some function of that name;
 * the first two positions are fixed by api.md.
 */
CREATE TEMP TABLE documented_args (fn name, pos int, arg text, typ regtype) ON COMMIT DROP;
INSERT INTO documented_args VALUES
    ('create', 1, 'queue', 'text'), ('create', NULL, 'max_attempts', 'integer'),
    ('create', NULL, 'lease', 'interval'), ('create', NULL, 'backoff_base', 'interval'),
    ('create', NULL, 'backoff_max', 'interval'), ('create', NULL, 'retention', 'interval'),
    ('create', NULL, 'if_not_exists', 'boolean'), ('create', NULL, 'max_running', 'integer'),
    ('create', NULL, 'group_retry', 'text'), ('create', NULL, 'rate_limit', 'integer'),
    ('create', NULL, 'rate_period', 'interval'), ('create', NULL, 'group_max_running', 'integer'),
    ('alter', 1, 'queue', 'text'), ('alter', NULL, 'max_attempts', 'integer'),
    ('alter', NULL, 'lease', 'interval'), ('alter', NULL, 'backoff_base', 'interval'),
    ('alter', NULL, 'backoff_max', 'interval'), ('alter', NULL, 'retention', 'interval'),
    ('alter', NULL, 'max_running', 'integer'), ('alter', NULL, 'group_retry', 'text'),
    ('alter', NULL, 'rate_limit', 'integer'), ('alter', NULL, 'rate_period', 'interval'),
    ('alter', NULL, 'group_max_running', 'integer'),
    ('drop', 1, 'queue', 'text'), ('pause', 1, 'queue', 'text'), ('resume', 1, 'queue', 'text'),
    ('enqueue', 1, 'queue', 'text'), ('enqueue', 2, 'payload', 'jsonb'),
    ('enqueue', NULL, 'run_at', 'timestamptz'), ('enqueue', NULL, 'delay', 'interval'),
    ('enqueue', NULL, 'priority', 'integer'), ('enqueue', NULL, 'group_key', 'text'),
    ('enqueue', NULL, 'dedup_key', 'text'),
    ('enqueue_batch', 1, 'queue', 'text'), ('enqueue_batch', 2, 'payloads', 'jsonb[]'),
    ('enqueue_batch', NULL, 'run_at', 'timestamptz'), ('enqueue_batch', NULL, 'delay', 'interval'),
    ('enqueue_batch', NULL, 'priority', 'integer'), ('enqueue_batch', NULL, 'group_key', 'text'),
    ('claim', 1, 'queue', 'text'), ('claim', 2, 'max_jobs', 'integer'),
    ('claim', NULL, 'lease', 'interval'), ('claim', NULL, 'wait', 'interval'),
    ('complete', 1, 'id', 'bigint'), ('complete', 2, 'attempt', 'integer'),
    ('complete', 1, 'ids', 'bigint[]'),
    ('fail', 1, 'id', 'bigint'), ('fail', 2, 'error', 'text'),
    ('fail', NULL, 'retry_in', 'interval'), ('fail', NULL, 'attempt', 'integer'),
    ('extend', 1, 'id', 'bigint'), ('extend', 2, 'lease', 'interval'), ('extend', 3, 'attempt', 'integer'),
    ('release', 1, 'id', 'bigint'), ('release', NULL, 'run_at', 'timestamptz'),
    ('release', NULL, 'attempt', 'integer'),
    ('history', 1, 'id', 'bigint'),
    ('reschedule', 1, 'id', 'bigint'), ('reschedule', 2, 'run_at', 'timestamptz'),
    ('cancel', 1, 'id', 'bigint'), ('retry', 1, 'id', 'bigint'),
    ('purge', 1, 'queue', 'text'), ('purge', 2, 'filter', 'jsonb');

SELECT is_empty($$
    SELECT d.fn || '(' || d.arg || ' ' || d.typ::text || coalesce(' at position ' || d.pos, '') || ')'
      FROM documented_args d
     WHERE NOT EXISTS (
           SELECT 1
             FROM pg_proc p,
                  unnest(p.proargnames, coalesce(p.proallargtypes, p.proargtypes::oid[]),
                         coalesce(p.proargmodes, array_fill('i'::"char", ARRAY[p.pronargs])))
                      WITH ORDINALITY AS a(name, typ, mode, n)
            WHERE p.pronamespace = 'queue'::regnamespace AND p.proname = d.fn
              AND a.mode IN ('i', 'b')
              AND a.name = d.arg AND a.typ = d.typ
              AND (d.pos IS NULL OR a.n = d.pos))
     ORDER BY 1 $$,
    'every documented argument exists with its documented name and type');

SELECT is_empty($$
    SELECT p.oid::regprocedure::text
      FROM pg_proc p
     WHERE p.pronamespace = 'queue'::regnamespace
       AND p.proname IN ('create', 'alter', 'drop', 'enqueue', 'enqueue_batch', 'claim', 'fail', 'release', 'purge')
       AND p.pronargs - p.pronargdefaults
           > CASE WHEN p.proname IN ('create', 'alter', 'drop', 'claim', 'release') THEN 1 ELSE 2 END
     ORDER BY 1 $$,
    'every option after the documented positional arguments has a default');

SELECT is((SELECT pronargs - pronargdefaults FROM pg_proc
            WHERE pronamespace = 'queue'::regnamespace AND proname = 'claim')::int, 1,
          'claim(queue) alone is a valid call: max_jobs and the options default');
SELECT is((SELECT pronargdefaults FROM pg_proc
            WHERE oid = 'queue.complete(bigint, integer)'::regprocedure), 1::smallint,
          'complete(id) alone is a valid call: attempt defaults');
SELECT is((SELECT pronargdefaults FROM pg_proc
            WHERE oid = 'queue.extend(bigint, interval, integer)'::regprocedure), 1::smallint,
          'extend(id, lease) alone is a valid call: attempt defaults');

/* ------------------------------------------------- named-argument calls */

SELECT lives_ok($$SELECT queue.create('x', max_attempts => 3, lease => '10 s', backoff_base => '1 s',
                                       backoff_max => '1 min', retention => '1 day', if_not_exists => true,
                                       max_running => 50, group_retry => 'requeue', rate_limit => 1000,
                                       rate_period => '1 min', group_max_running => 1)$$,
                'create with every option named');
SELECT results_eq($$SELECT max_attempts, lease, backoff_base, backoff_max, retention, paused, max_running, group_retry,
                           rate_limit, rate_period, group_max_running
                      FROM queue.queues WHERE queue = 'x'$$,
                  $$VALUES (3, interval '10 s', interval '1 s', interval '1 min', interval '1 day', false, 50, 'requeue'::text,
                            1000, interval '1 min', 1)$$,
                  'named options of create are stored under their names');
SELECT lives_ok($$SELECT queue.create(queue => 'x2')$$, 'create(queue => ...)');
SELECT lives_ok($$SELECT queue.alter('x2', max_attempts => 4, lease => '20 s', backoff_base => '2 s',
                                     backoff_max => '2 min', retention => '2 days', max_running => 7,
                                     group_retry => 'requeue', rate_limit => 20, rate_period => '10 s',
                                     group_max_running => 3)$$,
                'alter with every option named');
SELECT results_eq($$SELECT max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry,
                           rate_limit, rate_period, group_max_running
                      FROM queue.queues WHERE queue = 'x2'$$,
                  $$VALUES (4, interval '20 s', interval '2 s', interval '2 min', interval '2 days', 7, 'requeue'::text,
                            20, interval '10 s', 3)$$,
                  'named options of alter are stored under their names');
SELECT lives_ok($$SELECT queue.pause(queue => 'x2')$$, 'pause(queue => ...)');
SELECT lives_ok($$SELECT queue.resume(queue => 'x2')$$, 'resume(queue => ...)');
SELECT lives_ok($$SELECT queue.drop(queue => 'x2')$$, 'drop(queue => ...)');

SELECT lives_ok($$SELECT queue.enqueue('x', '{"to":"a@b.c"}')$$,
                'untyped literal payload resolves to the one enqueue');
SELECT lives_ok($$SELECT queue.enqueue(queue => 'x', payload => '{}')$$,
                'enqueue(queue => ..., payload => ...)');
SELECT lives_ok($$SELECT queue.enqueue('x', '{}', run_at => now(), priority => 1, group_key => 'g', dedup_key => 'd')$$,
                'enqueue with run_at, priority, group_key, dedup_key named');
SELECT results_eq($$SELECT state, priority, group_key, dedup_key FROM queue.jobs WHERE queue = 'x' AND dedup_key = 'd'$$,
                  $$VALUES ('ready'::text, 1, 'g'::text, 'd'::text)$$,
                  'named enqueue options are stored under their names');
SELECT lives_ok($$SELECT queue.enqueue('x', '{"delayed":true}', delay => '1 hour')$$, 'enqueue(..., delay => ...)');
SELECT is((SELECT state FROM queue.jobs WHERE payload = '{"delayed":true}'), 'scheduled',
          'a job enqueued with delay => 1 hour is scheduled');
SELECT lives_ok($$SELECT queue.enqueue_batch('x', ARRAY['{"b":1}', '{"b":2}']::jsonb[],
                                             run_at => now(), priority => 2, group_key => 'gb')$$,
                'enqueue_batch with run_at, priority, group_key named');
SELECT lives_ok($$SELECT queue.enqueue_batch(queue => 'x', payloads => ARRAY['{"b":3}']::jsonb[], delay => '1 hour')$$,
                'enqueue_batch(queue => ..., payloads => ..., delay => ...)');
SELECT results_eq($$SELECT state, priority, group_key FROM queue.jobs WHERE payload ? 'b' ORDER BY id$$,
                  $$VALUES ('ready'::text, 2, 'gb'::text), ('waiting', 2, 'gb'), ('scheduled', 0, NULL)$$,
                  'named enqueue_batch options are stored under their names (the second job of group gb waits)');

-- The consuming calls, on a queue of their own.
SELECT queue.create('c', backoff_base => '0');
SELECT queue.enqueue('c', '{"n":1}') AS j1, queue.enqueue('c', '{"n":2}') AS j2 \gset
SELECT is((SELECT count(*)::int FROM queue.claim('c', max_jobs => 2, lease => '5 s')), 2,
          'claim(queue, max_jobs => 2, lease => ...) takes two jobs');
SELECT ok((SELECT bool_and(lease_until <= clock_timestamp() + interval '5 s'
                       AND lease_until > clock_timestamp() + interval '3 s')
             FROM queue.jobs WHERE queue = 'c'),
          'claim honours the named lease');
SELECT lives_ok($$SELECT queue.claim(queue => 'c', max_jobs => 1)$$, 'claim(queue => ..., max_jobs => ...)');
SELECT lives_ok($$SELECT queue.claim('c', wait => interval '0')$$,
                'claim accepts the documented wait option');

SELECT isnt(queue.extend(:j1, '1 min', attempt => 1), NULL, 'extend(id, lease, attempt => ...)');
SELECT isnt(queue.extend(id => :j1, lease => '2 min'), NULL, 'extend(id => ..., lease => ...)');
SELECT is(queue.fail(:j1, 'e', retry_in => '1 hour', attempt => 1), 'retry',
          'fail(id, error, retry_in => ..., attempt => ...)');
SELECT is(queue.complete(:j2, attempt => 1), true, 'complete(id, attempt => ...)');

SELECT queue.enqueue('c', '{"n":3}') AS j3 \gset
SELECT is((SELECT id FROM queue.claim('c')), :j3::bigint, 'claim(queue) takes the next job');
SELECT is(queue.release(:j3, run_at => now()), true, 'release(id, run_at => ...)');
SELECT is((SELECT id FROM queue.claim('c')), :j3::bigint, 'a released job is claimed again');
SELECT is(queue.release(id => :j3, attempt => 2), true, 'release(id => ..., attempt => ...) (claim 2 of the job)');
SELECT is((SELECT id FROM queue.claim('c')), :j3::bigint, 'claimed once more');
SELECT is(queue.fail(id => :j3, error => 'e2'), 'retry', 'fail(id => ..., error => ...)');
SELECT lives_ok(format('SELECT queue.reschedule(id => %s, run_at => now())', :j3),
                'reschedule(id => ..., run_at => ...)');
SELECT is((SELECT id FROM queue.claim('c')), :j3::bigint, 'a rescheduled job is claimed');
SELECT is(queue.complete(id => :j3), true, 'complete(id => ...)');
SELECT is(queue.complete(ids => ARRAY[:j3]::bigint[]), 0::bigint, 'complete(ids => ...)');
SELECT is(queue.complete(ARRAY[:j3]), 0::bigint, 'an untyped ARRAY[...] of ids resolves to complete(bigint[])');
SELECT ok((SELECT count(*) > 0 FROM queue.history(id => :j3)), 'history(id => ...)');

SELECT queue.enqueue('c', '{"n":4}') AS j4 \gset
SELECT lives_ok(format('SELECT queue.cancel(id => %s)', :j4), 'cancel(id => ...)');
SELECT queue.enqueue('c', '{"n":5,"k":1}') AS j5 \gset
SELECT is(queue.purge(queue => 'c', filter => '{"k":1}'), 1::bigint, 'purge(queue => ..., filter => ...)');
SELECT is(queue.purge('c'), 1::bigint, 'purge(queue) without a filter (j1, scheduled)');
SELECT lives_ok($$SELECT * FROM queue.tick()$$, 'tick()');

SELECT queue.alter('c', max_attempts => 1);
SELECT queue.enqueue('c', '{"n":6}') AS j6 \gset
SELECT is((SELECT id FROM queue.claim('c')), :j6::bigint, 'claim after alter');
SELECT is(queue.fail(:j6, 'last'), 'dead', 'fail on the last attempt (max_attempts 1 after alter)');
SELECT lives_ok(format('SELECT queue.retry(id => %s)', :j6), 'retry(id => ...)');

/* ------------------------------------------------------ views and types */

SELECT has_view('queue', 'queues', 'view queue.queues');
SELECT columns_are('queue', 'queues',
    ARRAY['queue', 'max_attempts', 'lease', 'backoff_base', 'backoff_max', 'retention', 'paused', 'created_at',
          'max_running', 'group_retry', 'rate_limit', 'rate_period', 'group_max_running']);
SELECT results_eq($$SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod)
                      FROM pg_attribute WHERE attrelid = 'queue.queues'::regclass AND attnum > 0 ORDER BY attname$$,
                  $$VALUES ('backoff_base', 'interval'), ('backoff_max', 'interval'),
                           ('created_at', 'timestamp with time zone'), ('group_max_running', 'integer'),
                           ('group_retry', 'text'), ('lease', 'interval'),
                           ('max_attempts', 'integer'), ('max_running', 'integer'), ('paused', 'boolean'),
                           ('queue', 'text'), ('rate_limit', 'integer'), ('rate_period', 'interval'),
                           ('retention', 'interval')$$,
                  'queue.queues column types');

SELECT has_view('queue', 'jobs', 'view queue.jobs');
SELECT columns_are('queue', 'jobs',
    ARRAY['queue', 'id', 'state', 'payload', 'priority', 'run_at', 'attempt', 'max_attempts', 'group_key',
          'dedup_key', 'enqueued_at', 'claimed_at', 'lease_until', 'last_error']);
SELECT results_eq($$SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod)
                      FROM pg_attribute WHERE attrelid = 'queue.jobs'::regclass AND attnum > 0
                       AND attname <> 'state' ORDER BY attname$$,
                  $$VALUES ('attempt', 'integer'), ('claimed_at', 'timestamp with time zone'),
                           ('dedup_key', 'text'), ('enqueued_at', 'timestamp with time zone'),
                           ('group_key', 'text'), ('id', 'bigint'), ('last_error', 'text'),
                           ('lease_until', 'timestamp with time zone'), ('max_attempts', 'integer'),
                           ('payload', 'jsonb'), ('priority', 'integer'), ('queue', 'text'),
                           ('run_at', 'timestamp with time zone')$$,
                  'queue.jobs column types');
SELECT ok((SELECT format_type(atttypid, atttypmod) IN ('text', 'queue.job_state')
             FROM pg_attribute WHERE attrelid = 'queue.jobs'::regclass AND attname = 'state'),
          'queue.jobs.state is text or the job_state enum');

SELECT has_view('queue', 'archive', 'view queue.archive');
-- api.md names only finished_at beside what queue.jobs has; the archive
-- keeps the columns of queue.jobs that still mean something once a job
-- finished (no lease, no max_attempts).
SELECT results_eq($$SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod)
                      FROM pg_attribute WHERE attrelid = 'queue.archive'::regclass AND attnum > 0
                       AND attname IN ('queue', 'id', 'state', 'payload', 'priority', 'run_at', 'attempt',
                                       'group_key', 'dedup_key', 'enqueued_at', 'claimed_at', 'finished_at',
                                       'last_error')
                     ORDER BY attname$$,
                  $$VALUES ('attempt', 'integer'), ('claimed_at', 'timestamp with time zone'),
                           ('dedup_key', 'text'), ('enqueued_at', 'timestamp with time zone'),
                           ('finished_at', 'timestamp with time zone'), ('group_key', 'text'),
                           ('id', 'bigint'), ('last_error', 'text'), ('payload', 'jsonb'),
                           ('priority', 'integer'), ('queue', 'text'),
                           ('run_at', 'timestamp with time zone'), ('state', 'text')$$,
                  'queue.archive has the columns of a finished job, with their types');

SELECT has_view('queue', 'stats', 'view queue.stats');
SELECT columns_are('queue', 'stats',
    ARRAY['queue', 'ready', 'scheduled', 'running', 'dead', 'oldest_ready_age',
          'completed_last_minute', 'failed_last_minute', 'waiting', 'shared_state']);
SELECT results_eq($$SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod)
                      FROM pg_attribute WHERE attrelid = 'queue.stats'::regclass AND attnum > 0 ORDER BY attname$$,
                  $$VALUES ('completed_last_minute', 'bigint'), ('dead', 'bigint'), ('failed_last_minute', 'bigint'),
                           ('oldest_ready_age', 'interval'), ('queue', 'text'), ('ready', 'bigint'),
                           ('running', 'bigint'), ('scheduled', 'bigint'), ('shared_state', 'boolean'),
                           ('waiting', 'bigint')$$,
                  'queue.stats column types');

SELECT has_type('queue', 'claimed', 'type queue.claimed');
SELECT columns_are('queue', 'claimed', ARRAY['id', 'payload', 'attempt', 'group_key', 'enqueued_at', 'lease_until']);
SELECT results_eq($$SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod)
                      FROM pg_attribute WHERE attrelid = 'queue.claimed'::regclass AND attnum > 0 ORDER BY attnum$$,
                  $$VALUES ('id', 'bigint'), ('payload', 'jsonb'), ('attempt', 'integer'), ('group_key', 'text'),
                           ('enqueued_at', 'timestamp with time zone'), ('lease_until', 'timestamp with time zone')$$,
                  'queue.claimed columns, in order, with their types');


/* -------------------------------------------------- extension hygiene */

SELECT ok((SELECT 'queue.queue_config'::regclass = ANY (extconfig) FROM pg_extension WHERE extname = 'queue'),
          'queue.queue_config is marked for pg_dump (pg_extension.extconfig)');
SELECT ok((SELECT 'queue.queue_number_seq'::regclass = ANY (extconfig) FROM pg_extension WHERE extname = 'queue'),
          'queue.queue_number_seq is marked for pg_dump, so new queues do not reuse numbers after a restore');

SELECT ok((SELECT count(*) >= 10 FROM pg_proc
            WHERE pronamespace = 'queue'::regnamespace
              AND prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')),
          'the extension has plpgsql functions (the next test is not vacuous)');
SELECT is_empty($$
    SELECT p.oid::regprocedure::text
      FROM pg_proc p
     WHERE p.pronamespace = 'queue'::regnamespace
       AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')
       AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c
                        WHERE c LIKE 'search\_path=%'
                          AND c NOT LIKE '%public%' AND c NOT LIKE '%$user%'
                          AND c LIKE '%pg\_temp')
     ORDER BY 1 $$,
    'every plpgsql function pins search_path (no public or $user, pg_temp last)');

SELECT * FROM finish();
ROLLBACK;
