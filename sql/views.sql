--
-- views.sql: queue.jobs, queue.archive and queue.stats.
--
-- Queues of this file are named vw_*; the views span every queue of the
-- database, so every query here is limited to those.
--
\set SHOW_CONTEXT never

-- The columns of the views.
SELECT attname, format_type(atttypid, atttypmod) AS type
  FROM pg_attribute
 WHERE attrelid = 'queue.jobs'::regclass AND attnum > 0 AND NOT attisdropped
 ORDER BY attnum;
SELECT attname, format_type(atttypid, atttypmod) AS type
  FROM pg_attribute
 WHERE attrelid = 'queue.archive'::regclass AND attnum > 0 AND NOT attisdropped
 ORDER BY attnum;
SELECT attname, format_type(atttypid, atttypmod) AS type
  FROM pg_attribute
 WHERE attrelid = 'queue.stats'::regclass AND attnum > 0 AND NOT attisdropped
 ORDER BY attnum;

-- An empty queue: no jobs, and a stats row of zeros.
SELECT queue.create('vw_empty');
SELECT count(*) FROM queue.jobs WHERE queue = 'vw_empty';
SELECT count(*) FROM queue.archive WHERE queue = 'vw_empty';
SELECT queue, ready, scheduled, running, dead, waiting, oldest_ready_age,
       completed_last_minute, failed_last_minute
  FROM queue.stats WHERE queue = 'vw_empty';

--
-- two queues with jobs in every state
--
SELECT queue.create('vw_mail', max_attempts => 1, lease => '1 hour');
SELECT queue.create('vw_sms', max_attempts => 3, backoff_base => '1 hour', lease => '1 hour');
SELECT queue.enqueue('vw_mail', '{"companyId": 3345, "to": "a"}', priority => 2, group_key => 'c3345') AS m1 \gset
SELECT queue.enqueue('vw_mail', '{"companyId": 3345, "to": "b"}', dedup_key => 'welcome-b') AS m2 \gset
SELECT queue.enqueue('vw_mail', '{"companyId": 12, "to": "c"}') AS m3 \gset
SELECT queue.enqueue('vw_mail', '{"companyId": 3345, "to": "d"}', delay => '1 hour') AS m4 \gset
SELECT queue.enqueue('vw_mail', '{"companyId": 12, "to": "e"}') AS m5 \gset
-- j waits behind a, the head of group c3345
SELECT queue.enqueue('vw_mail', '{"companyId": 3345, "to": "j"}', group_key => 'c3345') AS m6 \gset
SELECT queue.enqueue('vw_sms', '{"companyId": 3345, "to": "f"}') AS s1 \gset
SELECT queue.enqueue('vw_sms', '{"companyId": 77, "to": "g"}') AS s2 \gset
SELECT queue.enqueue('vw_sms', '{"companyId": 3345, "to": "h", "urgent": true}', run_at => now() + interval '1 day') AS s3 \gset
-- vw_mail: a (priority 2) runs and b dies; vw_sms: f fails once (backs off), g runs
SELECT payload->>'to' AS job FROM queue.claim('vw_mail', 2);
SELECT queue.fail(:m2, 'mailbox full');
SELECT payload->>'to' AS job FROM queue.claim('vw_sms', 2);
SELECT queue.fail(:s1, 'gateway down');

SELECT queue, state, payload->>'to' AS job, priority, attempt, max_attempts, group_key, dedup_key,
       claimed_at IS NOT NULL AS claimed, lease_until IS NOT NULL AS leased,
       run_at > now() AS in_future, enqueued_at <= now() AS enqueued_at_ok, last_error
  FROM queue.jobs WHERE queue LIKE 'vw\_%' ORDER BY queue, id;

-- filtering by state
SELECT queue, payload->>'to' AS job FROM queue.jobs WHERE queue LIKE 'vw\_%' AND state = 'ready' ORDER BY queue, id;
SELECT queue, payload->>'to' AS job FROM queue.jobs WHERE queue LIKE 'vw\_%' AND state = 'scheduled' ORDER BY queue, id;
SELECT queue, payload->>'to' AS job FROM queue.jobs WHERE queue LIKE 'vw\_%' AND state = 'running' ORDER BY queue, id;
SELECT queue, payload->>'to' AS job, last_error FROM queue.jobs WHERE queue LIKE 'vw\_%' AND state = 'dead' ORDER BY queue, id;
SELECT queue, payload->>'to' AS job, group_key FROM queue.jobs WHERE queue LIKE 'vw\_%' AND state = 'waiting' ORDER BY queue, id;
SELECT queue, state, count(*) FROM queue.jobs WHERE queue LIKE 'vw\_%' GROUP BY queue, state ORDER BY queue, state;

-- filtering by payload, across queues
SELECT queue, state, payload->>'to' AS job
  FROM queue.jobs
 WHERE queue LIKE 'vw\_%' AND payload @> '{"companyId": 3345}'
 ORDER BY queue, id;
SELECT queue, state, payload->>'to' AS job
  FROM queue.jobs
 WHERE queue LIKE 'vw\_%' AND payload @> '{"companyId": 3345, "urgent": true}';
SELECT count(*) FROM queue.jobs WHERE queue LIKE 'vw\_%' AND payload->>'companyId' = '12';
-- by id
SELECT queue, payload->>'to' AS job FROM queue.jobs WHERE id = :s2;

-- a scheduled job whose time has come shows as ready
SELECT queue.enqueue('vw_sms', '{"companyId": 77, "to": "i"}', delay => '10 milliseconds') AS s4 \gset
SELECT pg_sleep(0.05);
SELECT state, run_at <= now() AS due, run_at > enqueued_at AS was_delayed FROM queue.jobs WHERE id = :s4;
-- The background worker makes it ready (or a claim would): wait for that,
-- at most 10 seconds, so that what follows does not depend on when.
DO $$
BEGIN
    FOR i IN 1..1000 LOOP
        EXIT WHEN (SELECT ready FROM queue.stats WHERE queue = 'vw_sms') = 1;
        PERFORM pg_sleep(0.01);
    END LOOP;
END
$$;

--
-- stats
--
SELECT queue, ready, scheduled, running, dead, waiting, oldest_ready_age IS NOT NULL AS has_oldest_ready_age,
       completed_last_minute, failed_last_minute
  FROM queue.stats WHERE queue LIKE 'vw\_%' ORDER BY queue;
-- the counts agree with queue.jobs
SELECT s.queue,
       s.ready = count(*) FILTER (WHERE j.state = 'ready') AS ready_ok,
       s.scheduled = count(*) FILTER (WHERE j.state = 'scheduled') AS scheduled_ok,
       s.running = count(*) FILTER (WHERE j.state = 'running') AS running_ok,
       s.dead = count(*) FILTER (WHERE j.state = 'dead') AS dead_ok,
       s.waiting = count(*) FILTER (WHERE j.state = 'waiting') AS waiting_ok
  FROM queue.stats s LEFT JOIN queue.jobs j ON j.queue = s.queue
 WHERE s.queue LIKE 'vw\_%'
 GROUP BY s.queue, s.ready, s.scheduled, s.running, s.dead, s.waiting
 ORDER BY s.queue;
-- oldest_ready_age is how long a ready job has waited
SELECT oldest_ready_age >= interval '0' AS not_negative,
       oldest_ready_age < interval '1 hour' AS recent
  FROM queue.stats WHERE queue = 'vw_mail';

-- completions and failures are counted as they commit
SELECT queue.complete(:m1);
-- now that a is done, j is the head of its group, and ready
SELECT state FROM queue.jobs WHERE id = :m6;
SELECT payload->>'to' AS job FROM queue.claim('vw_mail', 10) ORDER BY 1;
SELECT queue.complete(ARRAY[:m3, :m5, :m6]);
SELECT queue.complete(:s2);
-- (priority 1: f goes before i, which the background worker made ready
-- before f was rescheduled)
SELECT queue.reschedule(:s1, now(), priority => 1);
SELECT payload->>'to' AS job FROM queue.claim('vw_sms');
SELECT queue.fail(:s1, 'gateway down again');
-- a rolled-back completion is not counted
BEGIN;
SELECT payload->>'to' AS job FROM queue.claim('vw_sms');
SELECT queue.complete(:s4);
ROLLBACK;
-- nor a stale one
SELECT queue.complete(:s1, 1);
SELECT queue, ready, scheduled, running, dead, waiting, oldest_ready_age IS NOT NULL AS has_oldest_ready_age,
       completed_last_minute, failed_last_minute
  FROM queue.stats WHERE queue LIKE 'vw\_%' ORDER BY queue;

--
-- archive
--
SELECT queue.cancel(:m4);
SELECT queue, state, payload->>'to' AS job, priority, attempt, group_key, dedup_key,
       claimed_at IS NOT NULL AS claimed, finished_at IS NOT NULL AS finished,
       finished_at >= enqueued_at AS finished_after_enqueued, last_error
  FROM queue.archive WHERE queue LIKE 'vw\_%' ORDER BY queue, id;
SELECT queue, state, count(*) FROM queue.archive WHERE queue LIKE 'vw\_%' GROUP BY queue, state ORDER BY queue, state;
-- archived jobs can be searched by payload too
SELECT queue, payload->>'to' AS job FROM queue.archive
 WHERE queue LIKE 'vw\_%' AND payload @> '{"companyId": 12}' ORDER BY queue, id;
-- a job is in exactly one of the views
SELECT count(*) AS in_both
  FROM queue.jobs j JOIN queue.archive a USING (id)
 WHERE j.queue LIKE 'vw\_%';

-- queue.queues and queue.stats have a row per queue, queue.jobs none for a dropped one
SELECT queue.drop('vw_empty');
SELECT count(*) FROM queue.stats WHERE queue = 'vw_empty';
SELECT (SELECT count(*) FROM queue.queues WHERE queue LIKE 'vw\_%') AS queues,
       (SELECT count(*) FROM queue.stats WHERE queue LIKE 'vw\_%') AS stats;
