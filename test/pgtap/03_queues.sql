-- 03_queues.sql: managing queues: create, alter, drop, pause, resume,
-- purge, and the views queue.queues and queue.stats.
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT plan(120);

-- The relations of a queue: its tables (q_, a_, s_) and what is named
-- after them: '$' and a suffix (sequence, indexes), or _pkey.
CREATE FUNCTION pg_temp.relations_of(queue text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM pg_class
     WHERE relnamespace = 'queue'::regnamespace
       AND left(relname, 2) IN ('q_', 'a_', 's_')
       AND (substr(relname, 3) = queue OR substr(relname, 3) = queue || '_pkey'
            OR starts_with(substr(relname, 3), queue || '$'))
$$;

SELECT is((SELECT count(*)::int FROM queue.queues WHERE queue IN ('qa', 'qb')), 0, 'no queues qa, qb yet');

/* --------------------------------------------------------------- create */

SELECT lives_ok($$SELECT queue.create('qa')$$, 'create a queue with the defaults');
SELECT results_eq($$SELECT queue, max_attempts, lease, backoff_base, backoff_max, paused
                      FROM queue.queues WHERE queue = 'qa'$$,
                  $$VALUES ('qa'::text, 5, interval '30 seconds', interval '1 second', interval '1 hour', false)$$,
                  'defaults: max_attempts 5, lease 30 s, backoff_base 1 s, backoff_max 1 h, not paused');
SELECT ok((SELECT retention >= interval '0' FROM queue.queues WHERE queue = 'qa'), 'a default retention is set');
SELECT ok((SELECT created_at BETWEEN now() AND clock_timestamp() FROM queue.queues WHERE queue = 'qa'),
          'created_at is the creation time');
SELECT has_table('queue', 'q_qa', 'create makes the job table queue.q_qa');
SELECT has_table('queue', 'a_qa', 'create makes the archive table queue.a_qa');
SELECT has_sequence('queue', 'q_qa$seq', 'create makes the sequence queue."q_qa$seq"');
SELECT ok(pg_temp.relations_of('qa') > 3, 'pg_temp.relations_of finds the relations of a queue');

SELECT throws_ok($$SELECT queue.create('qa')$$, '42710', NULL, 'creating an existing queue: 42710 duplicate_object');
SELECT lives_ok($$SELECT queue.create('qa', max_attempts => 9, lease => '1 hour', if_not_exists => true)$$,
                'creating an existing queue with if_not_exists => true is a no-op');
SELECT results_eq($$SELECT max_attempts, lease FROM queue.queues WHERE queue = 'qa'$$,
                  $$VALUES (5, interval '30 seconds')$$,
                  'if_not_exists does not change the existing queue''s options');
SELECT is((SELECT count(*)::int FROM queue.queues WHERE queue = 'qa'), 1, 'still one queue qa');

SELECT lives_ok($$SELECT queue.create('qb', max_attempts => 2, lease => '5 minutes', backoff_base => '0',
                                       backoff_max => '10 seconds', retention => '0')$$,
                'create with every option');
SELECT results_eq($$SELECT max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry
                      FROM queue.queues WHERE queue = 'qb'$$,
                  $$VALUES (2, interval '5 minutes', interval '0', interval '10 seconds', interval '0', NULL::int,
                            'block'::text)$$,
                  'the options are stored as given; max_running and group_retry default to no limit and block');
SELECT lives_ok($$SELECT queue.create('qc', max_running => 3, group_retry => 'requeue')$$,
                'create with max_running and group_retry');
SELECT results_eq($$SELECT max_running, group_retry FROM queue.queues WHERE queue = 'qc'$$,
                  $$VALUES (3, 'requeue'::text)$$, 'max_running and group_retry are stored as given');

-- names
SELECT lives_ok(format('SELECT queue.create(%L)', repeat('n', 48)), 'a 48-character name is accepted');
SELECT lives_ok($$SELECT queue.create('a1_b2')$$, 'letters, digits and underscores are accepted');
SELECT throws_ok(format('SELECT queue.create(%L)', repeat('n', 49)), '42602', NULL, 'a 49-character name: 42602');
SELECT throws_ok($$SELECT queue.create('Emails')$$, '42602', NULL, 'an upper-case letter: 42602');
SELECT throws_ok($$SELECT queue.create('1emails')$$, '42602', NULL, 'a leading digit: 42602');
SELECT throws_ok($$SELECT queue.create('_emails')$$, '42602', NULL, 'a leading underscore: 42602');
SELECT throws_ok($$SELECT queue.create('e-mails')$$, '42602', NULL, 'a hyphen: 42602');
SELECT throws_ok($$SELECT queue.create('e mails')$$, '42602', NULL, 'a space: 42602');
SELECT throws_ok($$SELECT queue.create('emails"; drop table x; --')$$, '42602', NULL, 'quotes and semicolons: 42602');
SELECT throws_ok($$SELECT queue.create('émails')$$, '42602', NULL, 'a non-ASCII letter: 42602');
SELECT throws_ok($$SELECT queue.create('')$$, '42602', NULL, 'an empty name: 42602');
SELECT throws_ok($$SELECT queue.create(NULL)$$, '22004', NULL, 'a NULL name: 22004');
SELECT is((SELECT count(*)::int FROM queue.queues WHERE queue !~ '^[a-z][a-z0-9_]{0,47}$'), 0,
          'no queue with an invalid name was created');

-- the full-length name works end to end (its relation names fit in NAMEDATALEN)
SELECT queue.enqueue(repeat('n', 48), '{"long":true}') AS jlong \gset
SELECT is((SELECT id FROM queue.claim(repeat('n', 48))), :jlong::bigint, 'enqueue and claim on a 48-character queue');
SELECT is(queue.complete(:jlong), true, 'complete on a 48-character queue');
SELECT lives_ok(format('SELECT queue.drop(%L)', repeat('n', 48)), 'drop a 48-character queue');

-- options
SELECT throws_ok($$SELECT queue.create('qbad', max_attempts => 0)$$, '22023', NULL, 'max_attempts 0: 22023');
SELECT throws_ok($$SELECT queue.create('qbad', max_attempts => -1)$$, '22023', NULL, 'negative max_attempts: 22023');
SELECT throws_ok($$SELECT queue.create('qbad', lease => '0')$$, '22023', NULL, 'lease 0: 22023');
SELECT throws_ok($$SELECT queue.create('qbad', lease => '-1 second')$$, '22023', NULL, 'negative lease: 22023');
SELECT throws_ok($$SELECT queue.create('qbad', backoff_base => '-1 second')$$, '22023', NULL, 'negative backoff_base: 22023');
SELECT throws_ok($$SELECT queue.create('qbad', backoff_base => '1 minute', backoff_max => '1 second')$$, '22023', NULL,
                 'backoff_max below backoff_base: 22023');
SELECT throws_ok($$SELECT queue.create('qbad', retention => '-1 day')$$, '22023', NULL, 'negative retention: 22023');
SELECT throws_ok($$SELECT queue.create('qbad', backoff_base => '1 year 1 day', backoff_max => '2 years')$$, '22023',
                 'backoff_base must be between 0 and 1 year', 'backoff_base over 1 year: 22023');
SELECT throws_ok($$SELECT queue.create('qbad', backoff_max => '1 year 1 day')$$, '22023',
                 'backoff_max must be at least backoff_base and at most 1 year', 'backoff_max over 1 year: 22023');
SELECT lives_ok($$SELECT queue.create('qyear', backoff_base => '1 year', backoff_max => '1 year')$$,
                'backoff_base and backoff_max of exactly 1 year are accepted');
SELECT throws_ok($$SELECT queue.create('qbad', max_running => 0)$$, '22023', NULL, 'max_running 0 in create: 22023');
SELECT throws_ok($$SELECT queue.create('qbad', group_retry => 'skip')$$, '22023', NULL, 'an unknown group_retry: 22023');
SELECT is((SELECT count(*)::int FROM queue.queues WHERE queue = 'qbad'), 0, 'a refused create leaves no queue');
SELECT is(pg_temp.relations_of('qbad'), 0::bigint, 'a refused create leaves no tables');

/* ---------------------------------------------------------------- alter */

SELECT lives_ok($$SELECT queue.alter('qa', lease => '1 minute')$$, 'alter one option');
SELECT results_eq($$SELECT max_attempts, lease, backoff_base, backoff_max FROM queue.queues WHERE queue = 'qa'$$,
                  $$VALUES (5, interval '1 minute', interval '1 second', interval '1 hour')$$,
                  'alter changes only the option given');
SELECT lives_ok($$SELECT queue.alter('qa', max_attempts => 2, backoff_base => '1 minute', backoff_max => '2 minutes',
                                      retention => '7 days')$$, 'alter several options');
SELECT results_eq($$SELECT max_attempts, lease, backoff_base, backoff_max, retention FROM queue.queues WHERE queue = 'qa'$$,
                  $$VALUES (2, interval '1 minute', interval '1 minute', interval '2 minutes', interval '7 days')$$,
                  'alter stores every option given');
SELECT throws_ok($$SELECT queue.alter('qa', max_attempts => 0)$$, '22023', NULL, 'alter to max_attempts 0: 22023');
SELECT throws_ok($$SELECT queue.alter('qa', backoff_base => '1 hour')$$, '22023', NULL,
                 'alter backoff_base above the existing backoff_max: 22023');
SELECT throws_ok($$SELECT queue.alter('qa', lease => '0')$$, '22023', NULL, 'alter to lease 0: 22023');
SELECT throws_ok($$SELECT queue.alter('qa', backoff_max => '2 years')$$, '22023', NULL,
                 'alter backoff_max above 1 year: 22023');
SELECT results_eq($$SELECT max_attempts, lease, backoff_base, backoff_max FROM queue.queues WHERE queue = 'qa'$$,
                  $$VALUES (2, interval '1 minute', interval '1 minute', interval '2 minutes')$$,
                  'refused alters change nothing');
SELECT lives_ok($$SELECT queue.alter('qc', max_running => 5)$$, 'alter max_running');
SELECT results_eq($$SELECT max_running, group_retry FROM queue.queues WHERE queue = 'qc'$$,
                  $$VALUES (5, 'requeue'::text)$$, 'alter changes max_running only');
SELECT lives_ok($$SELECT queue.alter('qc', group_retry => 'block')$$, 'alter group_retry');
SELECT results_eq($$SELECT max_running, group_retry FROM queue.queues WHERE queue = 'qc'$$,
                  $$VALUES (5, 'block'::text)$$, 'alter changes group_retry only');
SELECT lives_ok($$SELECT queue.alter('qc', max_running => 0)$$, 'alter max_running => 0');
SELECT is((SELECT max_running FROM queue.queues WHERE queue = 'qc'), NULL::int, 'max_running 0 removes the limit');
SELECT throws_ok($$SELECT queue.alter('no_such_queue', lease => '1 minute')$$, '42704', NULL, 'alter an unknown queue: 42704');
SELECT throws_ok($$SELECT queue.alter('No', lease => '1 minute')$$, '42602', NULL, 'alter with an invalid name: 42602');

-- altered options take effect
SELECT queue.enqueue('qa', '{"n":1}') AS a1 \gset
SELECT ok((SELECT lease_until BETWEEN clock_timestamp() + interval '50 seconds' AND clock_timestamp() + interval '1 minute'
             FROM queue.claim('qa')),
          'claim uses the altered lease (1 minute)');
SELECT is((SELECT max_attempts FROM queue.jobs WHERE id = :a1), 2, 'queue.jobs shows the altered max_attempts');
SELECT clock_timestamp() AS t0 \gset
SELECT is(queue.fail(:a1, 'e'), 'retry', 'first failure of two attempts');
SELECT clock_timestamp() AS t1 \gset
SELECT ok((SELECT run_at BETWEEN :'t0'::timestamptz + interval '30 seconds' AND :'t1'::timestamptz + interval '1 minute'
             FROM queue.jobs WHERE id = :a1),
          'fail uses the altered backoff_base (1 minute, jitter at most half)');
SELECT queue.reschedule(:a1, now());
SELECT is((SELECT attempt FROM queue.claim('qa')), 2, 'second attempt');
SELECT is(queue.fail(:a1, 'e'), 'dead', 'the altered max_attempts (2) makes the second failure dead');

/* ----------------------------------------------------- pause and resume */

SELECT queue.create('qp');
SELECT lives_ok($$SELECT queue.pause('qp')$$, 'pause a queue');
SELECT is((SELECT paused FROM queue.queues WHERE queue = 'qp'), true, 'queue.queues shows it paused');
SELECT lives_ok($$SELECT queue.enqueue('qp', '{"n":1}')$$, 'a paused queue accepts enqueue');
SELECT lives_ok($$SELECT queue.enqueue_batch('qp', ARRAY['{"n":2}', '{"n":3}']::jsonb[])$$,
                'a paused queue accepts enqueue_batch');
SELECT is((SELECT count(*)::int FROM queue.jobs WHERE queue = 'qp' AND state = 'ready'), 3,
          'the jobs of a paused queue are ready');
SELECT is((SELECT count(*)::int FROM queue.claim('qp', 10)), 0, 'a paused queue hands out no jobs');
SELECT is((SELECT ready FROM queue.stats WHERE queue = 'qp'), 3::bigint, 'queue.stats counts the ready jobs of a paused queue');
SELECT lives_ok($$SELECT queue.resume('qp')$$, 'resume the queue');
SELECT is((SELECT paused FROM queue.queues WHERE queue = 'qp'), false, 'queue.queues shows it resumed');
SELECT results_eq($$SELECT payload->>'n' FROM queue.claim('qp', 10) ORDER BY id$$,
                  $$VALUES ('1'::text), ('2'), ('3')$$,
                  'a resumed queue hands out its jobs');
SELECT throws_ok($$SELECT queue.pause('no_such_queue')$$, '42704', NULL, 'pause an unknown queue: 42704');
SELECT throws_ok($$SELECT queue.resume('no_such_queue')$$, '42704', NULL, 'resume an unknown queue: 42704');
SELECT throws_ok($$SELECT queue.pause('Bad')$$, '42602', NULL, 'pause with an invalid name: 42602');

-- queues are independent
SELECT queue.create('qi1');
SELECT queue.create('qi2');
SELECT queue.enqueue('qi1', '{"q":1}') AS i1 \gset
SELECT queue.pause('qi2');
SELECT is((SELECT count(*)::int FROM queue.claim('qi2')), 0, 'claim on another queue does not take the job');
SELECT is((SELECT id FROM queue.claim('qi1')), :i1::bigint, 'pausing one queue does not pause another');

/* ---------------------------------------------------------------- stats */

SELECT queue.create('qs', max_attempts => 1);
SELECT queue.enqueue('qs', '{"will":"die"}') AS sd \gset
SELECT count(*) AS skip_n FROM queue.claim('qs') \gset
SELECT is(queue.fail(:sd, 'x'), 'dead', 'one dead job');
SELECT queue.enqueue('qs', '{"n":1}') AS s1 \gset
SELECT count(*) AS skip_b FROM queue.enqueue_batch('qs', ARRAY['{"n":2}', '{"n":3}']::jsonb[]) \gset
SELECT queue.enqueue('qs', '{"n":4}', delay => '1 hour') AS s4 \gset
SELECT is((SELECT id FROM queue.claim('qs')), :s1::bigint, 'one running job (the oldest ready one)');
SELECT queue.enqueue('qs', '{"n":6}', group_key => 'sg') AS s6, queue.enqueue('qs', '{"n":7}', group_key => 'sg') AS s7 \gset
SELECT results_eq($$SELECT ready, scheduled, running, dead, waiting FROM queue.stats WHERE queue = 'qs'$$,
                  $$VALUES (3::bigint, 1::bigint, 1::bigint, 1::bigint, 1::bigint)$$,
                  'queue.stats counts ready, scheduled, running, dead and waiting jobs');
SELECT results_eq($$SELECT state, count(*) FROM queue.jobs WHERE queue = 'qs' GROUP BY state ORDER BY state$$,
                  $$VALUES ('dead'::text, 1::bigint), ('ready', 3), ('running', 1), ('scheduled', 1), ('waiting', 1)$$,
                  'queue.jobs agrees');
SELECT ok((SELECT oldest_ready_age >= interval '0' FROM queue.stats WHERE queue = 'qs'),
          'oldest_ready_age is a non-negative interval when jobs are ready');
SELECT ok((SELECT completed_last_minute >= 0 AND failed_last_minute >= 0 FROM queue.stats WHERE queue = 'qs'),
          'completed_last_minute and failed_last_minute are counts');
SELECT queue.enqueue('qs', '{"n":5}', run_at => now() - interval '1 hour') AS s5 \gset
SELECT ok((SELECT oldest_ready_age BETWEEN interval '0' AND interval '1 hour' FROM queue.stats WHERE queue = 'qs'),
          'oldest_ready_age stays within what the oldest ready job can have waited');
SELECT is((SELECT count(*)::int FROM queue.stats), (SELECT count(*)::int FROM queue.queues),
          'queue.stats has one row per queue');
SELECT results_eq($$SELECT ready, scheduled, running, dead FROM queue.stats WHERE queue = 'qb'$$,
                  $$VALUES (0::bigint, 0::bigint, 0::bigint, 0::bigint)$$,
                  'an empty queue has zero counts');

/* ---------------------------------------------------------------- purge */

SELECT is(queue.purge('qs', '{"n":2}'), 1::bigint, 'purge with a filter deletes the jobs whose payload contains it');
SELECT is((SELECT count(*)::int FROM queue.jobs WHERE queue = 'qs' AND payload @> '{"n":2}'), 0, 'that job is gone');
SELECT throws_ok($$SELECT queue.purge('qs', '[1]')$$, '22023', NULL, 'a purge filter that is not an object: 22023');
SELECT is(queue.purge('qs'), 6::bigint, 'purge without a filter deletes the ready, scheduled, waiting and dead jobs');
SELECT is((SELECT count(*)::int FROM queue.jobs WHERE queue = 'qs' AND state <> 'running'), 0,
          'no waiting or dead job is left');

/* ----------------------------------------------------------------- drop */

SELECT queue.create('qd');
SELECT queue.enqueue('qd', '{"n":1}') AS d1, queue.enqueue('qd', '{"n":2}') AS d2 \gset
SELECT is((SELECT id FROM queue.claim('qd')), :d1::bigint, 'claim a job of the queue to drop');
SELECT is(queue.complete(:d1), true, 'and complete it, so it is archived');
SELECT is((SELECT count(*)::int FROM queue.archive WHERE queue = 'qd'), 1, 'the queue has an archived job');
SELECT lives_ok($$SELECT queue.drop('qd')$$, 'drop a queue with jobs');
SELECT is((SELECT count(*)::int FROM queue.queues WHERE queue = 'qd'), 0, 'the dropped queue is gone from queue.queues');
SELECT hasnt_table('queue', 'q_qd', 'drop removes queue.q_qd');
SELECT hasnt_table('queue', 'a_qd', 'drop removes queue.a_qd');
SELECT is(pg_temp.relations_of('qd'), 0::bigint, 'drop leaves no relation of the queue behind');
SELECT is((SELECT count(*)::int FROM queue.jobs WHERE id IN (:d1, :d2)) + (SELECT count(*)::int FROM queue.archive WHERE id IN (:d1, :d2)),
          0, 'its jobs are gone from queue.jobs and queue.archive');
SELECT is((SELECT count(*)::int FROM queue.stats WHERE queue = 'qd'), 0, 'and from queue.stats');
SELECT throws_ok($$SELECT queue.enqueue('qd', '{}')$$, '42704', NULL, 'enqueue into a dropped queue: 42704');
SELECT throws_ok(format('SELECT queue.complete(%s)', :d2), NULL, NULL, 'completing a job of a dropped queue is an error');
SELECT is(queue.complete(:d2, attempt => 1), false, 'with a token it returns false');
SELECT throws_ok($$SELECT queue.drop('qd')$$, '42704', NULL, 'dropping it again: 42704');
SELECT lives_ok($$SELECT queue.drop('qd', if_exists => true)$$, 'drop with if_exists => true is a no-op');
SELECT throws_ok($$SELECT queue.drop('Qd')$$, '42602', NULL, 'drop with an invalid name: 42602');

SELECT lives_ok($$SELECT queue.create('qd', max_attempts => 7)$$, 'a dropped queue''s name can be used again');
SELECT results_eq($$SELECT max_attempts, paused FROM queue.queues WHERE queue = 'qd'$$, $$VALUES (7, false)$$,
                  'the new queue has its own options');
SELECT is((SELECT count(*)::int FROM queue.jobs WHERE queue = 'qd'), 0, 'the new queue starts empty');
SELECT queue.enqueue('qd', '{"new":true}') AS d3 \gset
SELECT results_eq($$SELECT payload, attempt FROM queue.claim('qd')$$, $$VALUES ('{"new":true}'::jsonb, 1)$$,
                  'the new queue works');
SELECT is((SELECT max_attempts FROM queue.jobs WHERE id = :d3), 7, 'with its own options');

SELECT * FROM finish();
ROLLBACK;
