--
-- queues.sql: queue.create, queue.alter, queue.drop, queue.pause,
-- queue.resume and the queue.queues view.
--
-- Queues of this file are named qs_*.  Job ids, timestamps and queue
-- numbers are never printed: they depend on what ran before.
--
\set SHOW_CONTEXT never

-- The view's columns.
SELECT attname, format_type(atttypid, atttypmod) AS type
  FROM pg_attribute
 WHERE attrelid = 'queue.queues'::regclass AND attnum > 0 AND NOT attisdropped
 ORDER BY attnum;

--
-- create with the defaults
--
SELECT queue.create('qs_defaults');
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, paused,
       created_at <= now() AS created_at_ok, max_running, group_retry
  FROM queue.queues WHERE queue = 'qs_defaults';
-- its tables and sequence exist (derived names use '$', which queue names
-- cannot contain)
SELECT to_regclass('queue.q_qs_defaults') IS NOT NULL AS jobs_table,
       to_regclass('queue.a_qs_defaults') IS NOT NULL AS archive_table,
       to_regclass('queue."q_qs_defaults$seq"') IS NOT NULL AS sequence;
-- and it is usable at once
SELECT queue.enqueue('qs_defaults', '{"n": 1}') > 0 AS enqueued;
SELECT queue, state, payload FROM queue.jobs WHERE queue = 'qs_defaults';

-- Vacuum never truncates the tables whose rows churn: giving back a
-- drained table's empty tail takes an ACCESS EXCLUSIVE lock that stalls
-- every claim.  VACUUM here reclaims the drained rows (the worker's short
-- transactions may keep a few) but leaves the file its size.
SELECT relname, reloptions FROM pg_class
 WHERE relname IN ('q_qs_defaults', 'l_qs_defaults') ORDER BY 1;
SELECT queue.create('qs_vacuum', retention => '0');
SELECT count(*) FROM queue.enqueue_batch('qs_vacuum', (SELECT array_agg('{}'::jsonb) FROM generate_series(1, 2000)));
SELECT pg_relation_size('queue.q_qs_vacuum') AS size_full \gset
SELECT count(queue.complete(id)) AS completed FROM queue.claim('qs_vacuum', 2000);
VACUUM queue.q_qs_vacuum;
SELECT pg_relation_size('queue.q_qs_vacuum') = :size_full AS size_kept;
SELECT queue.drop('qs_vacuum');

--
-- create with every option, by name and by position
--
SELECT queue.create('qs_options', max_attempts => 7, lease => '2 minutes',
                    backoff_base => '5 seconds', backoff_max => '10 minutes',
                    retention => '3 days', max_running => 4, group_retry => 'requeue');
SELECT queue.create('qs_positional', 3, '1 minute', '2 seconds', '20 seconds', '0', false, 6, 'requeue');
-- backoff_base 0 and backoff_max 0 are allowed (retry at once)
SELECT queue.create('qs_zero', backoff_base => '0', backoff_max => '0');
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, paused, max_running, group_retry
  FROM queue.queues WHERE queue LIKE 'qs\_%' ORDER BY queue;

--
-- creating a queue that exists
--
SELECT queue.create('qs_defaults');
-- if_not_exists: a notice, and nothing changes (not even the options)
SELECT queue.create('qs_defaults', max_attempts => 9, if_not_exists => true, max_running => 1,
                    group_retry => 'requeue');
SELECT queue, max_attempts, lease, max_running, group_retry FROM queue.queues WHERE queue = 'qs_defaults';
SELECT count(*) AS jobs_kept FROM queue.jobs WHERE queue = 'qs_defaults';
-- if_not_exists on a new name creates it
SELECT queue.create('qs_ine', if_not_exists => true);
SELECT count(*) FROM queue.queues WHERE queue = 'qs_ine';

--
-- alter: each option on its own, the others unchanged
--
SELECT queue.alter('qs_options', max_attempts => 2);
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry
  FROM queue.queues WHERE queue = 'qs_options';
SELECT queue.alter('qs_options', lease => '45 seconds');
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry
  FROM queue.queues WHERE queue = 'qs_options';
SELECT queue.alter('qs_options', backoff_base => '0');
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry
  FROM queue.queues WHERE queue = 'qs_options';
SELECT queue.alter('qs_options', backoff_max => '1 hour');
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry
  FROM queue.queues WHERE queue = 'qs_options';
SELECT queue.alter('qs_options', retention => '0');
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry
  FROM queue.queues WHERE queue = 'qs_options';
SELECT queue.alter('qs_options', max_running => 3);
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry
  FROM queue.queues WHERE queue = 'qs_options';
SELECT queue.alter('qs_options', group_retry => 'block');
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry
  FROM queue.queues WHERE queue = 'qs_options';
-- max_running 0 removes the limit
SELECT queue.alter('qs_options', max_running => 0);
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry
  FROM queue.queues WHERE queue = 'qs_options';
-- NULL arguments (explicit or left out) leave the options unchanged
SELECT queue.alter('qs_options', NULL, NULL, NULL, NULL, NULL);
SELECT queue.alter('qs_options', NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT queue.alter('qs_options');
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry
  FROM queue.queues WHERE queue = 'qs_options';
-- an alter that would leave invalid options is refused as a whole
SELECT queue.alter('qs_options', max_attempts => 4, backoff_base => '2 hours');
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry
  FROM queue.queues WHERE queue = 'qs_options';

-- The altered options are what the queue uses from then on.
-- lease 45 seconds: a claim's lease_until
SELECT queue.enqueue('qs_options', '{"n": 1}') AS opt1 \gset
SELECT payload, attempt,
       lease_until - now() BETWEEN interval '45 seconds' AND interval '50 seconds' AS lease_45s
  FROM queue.claim('qs_options');
-- backoff_base 0: a failure makes the job ready at once
SELECT queue.fail(:opt1, 'first');
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :opt1;
-- max_attempts 2: the second failure is the last
SELECT attempt FROM queue.claim('qs_options');
SELECT queue.fail(:opt1, 'second');
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :opt1;
-- retention 0: completed jobs are not archived
SELECT queue.enqueue('qs_options', '{"n": 2}') AS opt2 \gset
SELECT count(*) FROM queue.claim('qs_options');
SELECT queue.complete(:opt2);
SELECT count(*) AS archived FROM queue.archive WHERE queue = 'qs_options';
-- retention back to 1 day: they are
SELECT queue.alter('qs_options', retention => '1 day');
SELECT queue.enqueue('qs_options', '{"n": 3}') AS opt3 \gset
SELECT count(*) FROM queue.claim('qs_options');
SELECT queue.complete(:opt3);
SELECT state, payload FROM queue.archive WHERE queue = 'qs_options';
-- max_attempts raised to 5: a second failure is no longer the last
SELECT queue.alter('qs_options', max_attempts => 5);
SELECT queue.enqueue('qs_options', '{"n": 4}') AS opt4 \gset
SELECT count(*) FROM queue.claim('qs_options');
SELECT queue.fail(:opt4, 'again');
SELECT count(*) FROM queue.claim('qs_options');
SELECT queue.fail(:opt4, 'again');
SELECT state, attempt, max_attempts FROM queue.jobs WHERE id = :opt4;

--
-- drop
--
SELECT queue.create('qs_drop');
SELECT qno AS drop_qno FROM queue.queue_config WHERE name = 'qs_drop' \gset
SELECT count(*) > 3 AS has_relations FROM pg_class
 WHERE relnamespace = 'queue'::regnamespace AND relname ~ '^[a-z]_qs_drop(\$.*|_pkey)?$';
SELECT count(*) FROM queue.enqueue_batch('qs_drop', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[]);
SELECT id AS drop_done FROM queue.claim('qs_drop') \gset
SELECT queue.complete(:drop_done);
SELECT count(*) AS claimed FROM queue.claim('qs_drop');
SELECT (SELECT count(*) FROM queue.jobs WHERE queue = 'qs_drop') AS jobs,
       (SELECT count(*) FROM queue.archive WHERE queue = 'qs_drop') AS archived;
-- a drop rolled back changes nothing
BEGIN;
SELECT queue.drop('qs_drop');
ROLLBACK;
SELECT (SELECT count(*) FROM queue.queues WHERE queue = 'qs_drop') AS queues,
       (SELECT count(*) FROM queue.jobs WHERE queue = 'qs_drop') AS jobs,
       (SELECT count(*) FROM queue.archive WHERE queue = 'qs_drop') AS archived;
SELECT queue.enqueue('qs_drop', '{"n": 4}') > 0 AS still_usable;
-- drop: the queue, its jobs (running ones too), its archive and its tables go
SELECT queue.drop('qs_drop');
SELECT count(*) AS queues FROM queue.queues WHERE queue = 'qs_drop';
SELECT count(*) AS jobs FROM queue._job WHERE id % 1000000 = :drop_qno;
SELECT count(*) AS archived FROM queue._archive WHERE id % 1000000 = :drop_qno;
SELECT to_regclass('queue.q_qs_drop') IS NULL AS jobs_table_gone,
       to_regclass('queue.a_qs_drop') IS NULL AS archive_table_gone,
       to_regclass('queue."q_qs_drop$seq"') IS NULL AS sequence_gone;
-- nor any other relation of the queue (indexes, its slot table)
SELECT count(*) AS relations_left FROM pg_class
 WHERE relnamespace = 'queue'::regnamespace AND relname ~ '^[a-z]_qs_drop(\$.*|_pkey)?$';
-- dropping it again is an error, unless if_exists
SELECT queue.drop('qs_drop');
SELECT queue.drop('qs_drop', if_exists => true);
SELECT queue.enqueue('qs_drop', '{}');
-- a job id of the dropped queue is unknown now (a fencing token makes that false)
SELECT queue.complete(:drop_done, 1);
-- the name can be used again: a new, empty queue with its own numbering
SELECT queue.create('qs_drop', max_attempts => 1);
SELECT queue, max_attempts FROM queue.queues WHERE queue = 'qs_drop';
SELECT count(*) AS jobs FROM queue.jobs WHERE queue = 'qs_drop';
SELECT queue.enqueue('qs_drop', '{"n": "new"}') AS drop_new \gset
SELECT :drop_new % 1000000 <> :drop_qno AS new_queue_number, :drop_new / 1000000 AS seq;
SELECT payload FROM queue.claim('qs_drop');
SELECT queue.fail(:drop_new, 'max_attempts 1 is used');

--
-- pause and resume
--
SELECT queue.create('qs_pause');
SELECT queue.enqueue('qs_pause', '{"n": 1}') AS p1 \gset
SELECT queue.pause('qs_pause');
SELECT queue, paused FROM queue.queues WHERE queue = 'qs_pause';
-- a paused queue accepts jobs ...
SELECT queue.enqueue('qs_pause', '{"n": 2}') > :p1 AS accepted;
SELECT count(*) FROM queue.enqueue_batch('qs_pause', ARRAY['{"n": 3}']::jsonb[]);
-- ... but hands none out
SELECT count(*) AS claimed FROM queue.claim('qs_pause', 10);
SELECT state, count(*) FROM queue.jobs WHERE queue = 'qs_pause' GROUP BY state;
-- pausing twice is harmless
SELECT queue.pause('qs_pause');
-- a resume that is rolled back leaves it paused
BEGIN;
SELECT queue.resume('qs_pause');
ROLLBACK;
SELECT paused FROM queue.queues WHERE queue = 'qs_pause';
SELECT count(*) AS claimed FROM queue.claim('qs_pause', 10);
-- resume: the jobs are claimable, in order
SELECT queue.resume('qs_pause');
SELECT queue, paused FROM queue.queues WHERE queue = 'qs_pause';
SELECT payload, attempt FROM queue.claim('qs_pause', 10);
-- resuming a queue that is not paused is harmless
SELECT queue.resume('qs_pause');
SELECT paused FROM queue.queues WHERE queue = 'qs_pause';
-- pause in a transaction: takes effect at once for that transaction
BEGIN;
SELECT queue.pause('qs_pause');
SELECT queue.enqueue('qs_pause', '{"n": 4}') > 0 AS accepted;
SELECT count(*) AS claimed FROM queue.claim('qs_pause');
ROLLBACK;
SELECT paused FROM queue.queues WHERE queue = 'qs_pause';
SELECT count(*) AS jobs FROM queue.jobs WHERE queue = 'qs_pause' AND state = 'ready';

-- unknown queues
SELECT queue.alter('qs_nope', max_attempts => 1);
SELECT queue.pause('qs_nope');
SELECT queue.resume('qs_nope');
SELECT queue.drop('qs_nope');
