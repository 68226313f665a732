--
-- errors.sql: every bad input gets a clear error with its SQLSTATE, and
-- leaves everything as it was.
--
-- Queues of this file are named err_*.  Each call runs through
-- pg_temp.try, which prints "ok: <first column of the result>" or the
-- error as "<SQLSTATE>: <message>" with its DETAIL and HINT (a job id
-- passed as the second argument is bound to $1 and shown as <id>).  After
-- an error it compares the err_* queues, their jobs, their archives and
-- their tables with what they were before the call, and says whether
-- anything changed.
--
\set SHOW_CONTEXT never

-- Everything that could change, for the err_* queues.
CREATE FUNCTION pg_temp.fingerprint() RETURNS text
LANGUAGE sql AS $$
    SELECT md5(concat_ws('|',
        (SELECT string_agg(format('%s %s %s %s %s %s %s %s %s', queue, max_attempts, lease, backoff_base,
                                  backoff_max, retention, paused, max_running, group_retry), ',' ORDER BY queue)
           FROM queue.queues WHERE queue LIKE 'err\_%'),
        (SELECT string_agg(format('%s %s %s %s %s %s %s %s', id, state, attempt, priority, run_at,
                                  lease_until, last_error, payload), ',' ORDER BY id)
           FROM queue.jobs WHERE queue LIKE 'err\_%'),
        (SELECT string_agg(format('%s %s', id, state), ',' ORDER BY id)
           FROM queue.archive WHERE queue LIKE 'err\_%'),
        (SELECT string_agg(relname, ',' ORDER BY relname)
           FROM pg_class WHERE relnamespace = 'queue'::regnamespace
            AND (relname LIKE 'q\_err\_%' OR relname LIKE 'a\_err\_%'))))
$$;

CREATE PROCEDURE pg_temp.try(sql text, id bigint DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    res    text;
    st     text;
    msg    text;
    det    text;
    hnt    text;
    before text := pg_temp.fingerprint();
BEGIN
    BEGIN
        EXECUTE sql INTO res USING id;
        RAISE NOTICE 'ok: %', coalesce(replace(res, id::text, '<id>'), res, 'NULL');
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
    END;
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
    RAISE NOTICE '%', CASE WHEN pg_temp.fingerprint() = before THEN 'nothing changed' ELSE 'CHANGED' END;
END
$$;

SELECT queue.create('err_q', max_attempts => 2, backoff_base => '0', lease => '1 hour');
-- (calls that are meant to succeed use err_ok, so that err_q stays as set up here)
SELECT queue.create('err_ok');
SELECT queue.enqueue('err_q', '{"n": "running"}') AS running \gset
SELECT queue.enqueue('err_q', '{"n": "dead"}') AS dead \gset
SELECT count(*) FROM queue.claim('err_q', 2);
SELECT queue.fail(:dead, 'one');
SELECT count(*) FROM queue.claim('err_q', 1);
SELECT queue.fail(:dead, 'two');
SELECT queue.enqueue('err_q', '{"n": "ready"}') AS ready \gset
SELECT queue.enqueue('err_q', '{"n": "scheduled"}', delay => '1 day') AS scheduled \gset
SELECT payload->>'n' AS job, state, attempt FROM queue.jobs WHERE queue = 'err_q' ORDER BY id;

--
-- queue names
--
-- NULL and empty
CALL pg_temp.try($$SELECT queue.enqueue(NULL, '{}')$$);
CALL pg_temp.try($$SELECT queue.enqueue('', '{}')$$);
CALL pg_temp.try($$SELECT queue.create(NULL)$$);
CALL pg_temp.try($$SELECT queue.create('')$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch(NULL, ARRAY['{}']::jsonb[])$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim(NULL)$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('')$$);
CALL pg_temp.try($$SELECT queue.alter(NULL, max_attempts => 3)$$);
CALL pg_temp.try($$SELECT queue.drop(NULL)$$);
CALL pg_temp.try($$SELECT queue.drop(NULL, if_exists => true)$$);
CALL pg_temp.try($$SELECT queue.pause(NULL)$$);
CALL pg_temp.try($$SELECT queue.resume('')$$);
CALL pg_temp.try($$SELECT queue.purge(NULL)$$);
-- unknown queues
CALL pg_temp.try($$SELECT queue.enqueue('err_nope', '{}')$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_nope', ARRAY['{}']::jsonb[])$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_nope', ARRAY[]::jsonb[])$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('err_nope')$$);
CALL pg_temp.try($$SELECT queue.alter('err_nope', lease => '1 minute')$$);
CALL pg_temp.try($$SELECT queue.drop('err_nope')$$);
CALL pg_temp.try($$SELECT queue.pause('err_nope')$$);
CALL pg_temp.try($$SELECT queue.resume('err_nope')$$);
CALL pg_temp.try($$SELECT queue.purge('err_nope')$$);
-- names that are not plain lowercase identifiers are refused before any SQL runs
CREATE TABLE y (x int);
CALL pg_temp.try($$SELECT queue.create('x; drop table y')$$);
CALL pg_temp.try($$SELECT queue.enqueue('x; drop table y', '{}')$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('x; drop table y')$$);
CALL pg_temp.try($$SELECT queue.create('err_q; drop table y; --')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q''; drop table y; --', '{}')$$);
CALL pg_temp.try($$SELECT queue.create('err_q"; drop table y; --')$$);
CALL pg_temp.try($$SELECT queue.drop('err_q" cascade; drop table y; --')$$);
CALL pg_temp.try($$SELECT queue.purge('err_q''s')$$);
SELECT count(*) AS y_still_there FROM y;
DROP TABLE y;
-- uppercase, even for an existing queue's name
CALL pg_temp.try($$SELECT queue.create('Emails')$$);
CALL pg_temp.try($$SELECT queue.enqueue('ERR_Q', '{}')$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('Err_q')$$);
-- other characters, and the first character
CALL pg_temp.try($$SELECT queue.create('err-q')$$);
CALL pg_temp.try($$SELECT queue.create('err q')$$);
CALL pg_temp.try($$SELECT queue.create('err.q')$$);
CALL pg_temp.try($$SELECT queue.create('queue.err_q')$$);
CALL pg_temp.try($$SELECT queue.create('err_qé')$$);
CALL pg_temp.try($$SELECT queue.create(E'err_q\n')$$);
CALL pg_temp.try($$SELECT queue.create(' err_q')$$);
CALL pg_temp.try($$SELECT queue.create('1err')$$);
CALL pg_temp.try($$SELECT queue.create('_err')$$);
-- length: 48 characters are accepted, 49 are not
CALL pg_temp.try($$SELECT queue.create('err_' || repeat('x', 45))$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_' || repeat('x', 45), '{}')$$);
CALL pg_temp.try($$SELECT queue.create('err_' || repeat('x', 44))$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_' || repeat('x', 44), '{"n": 1}') > 0$$);
CALL pg_temp.try($$SELECT payload::text FROM queue.claim('err_' || repeat('x', 44))$$);
SELECT length(queue), state, payload FROM queue.jobs WHERE queue = 'err_' || repeat('x', 44);
CALL pg_temp.try($$SELECT queue.drop('err_' || repeat('x', 44))$$);
-- a one-letter name is fine
CALL pg_temp.try($$SELECT queue.create('e')$$);
CALL pg_temp.try($$SELECT queue.drop('e')$$);

--
-- payloads
--
CALL pg_temp.try($$SELECT queue.enqueue('err_q', NULL)$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '[1, 2]')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '[]')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '"a string"')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '42')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', 'true')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', 'null')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '{not json')$$);
-- batches: the array and each element
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_q', NULL)$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_q', ARRAY['{}', NULL]::jsonb[])$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_q', ARRAY['{}', '{}', '[3]']::jsonb[])$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_q', ARRAY['"s"']::jsonb[])$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_q', ARRAY[['{}'], ['{}']]::jsonb[])$$);
-- too large: queue.max_payload_size (superuser only) bounds the stored size
SET queue.max_payload_size = 100;
SHOW queue.max_payload_size;
CALL pg_temp.try($$SELECT queue.enqueue('err_q', jsonb_build_object('data', repeat('x', 200)))$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_q', ARRAY['{}'::jsonb, jsonb_build_object('data', repeat('x', 200))])$$);
-- a payload under the limit is fine
CALL pg_temp.try($$SELECT queue.enqueue('err_ok', jsonb_build_object('data', repeat('x', 50))) > 0$$);
SET queue.max_payload_size = 10;
RESET queue.max_payload_size;
SHOW queue.max_payload_size;
CALL pg_temp.try($$SELECT queue.enqueue('err_ok', jsonb_build_object('data', repeat('x', 200))) > 0$$);

--
-- enqueue options
--
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '{}', delay => '-1 second')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '{}', delay => '-1 day 1 hour')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '{}', run_at => now(), delay => '1 hour')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '{}', run_at => 'infinity')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '{}', run_at => '-infinity')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '{}', delay => '300000 years')$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '{}', priority => NULL)$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '{}', group_key => repeat('g', 513))$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '{}', group_key => repeat('é', 257))$$);
CALL pg_temp.try($$SELECT queue.enqueue('err_q', '{}', dedup_key => repeat('d', 513))$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_q', ARRAY['{}']::jsonb[], delay => '-1 second')$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_q', ARRAY['{}']::jsonb[], run_at => now(), delay => '1 hour')$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_q', ARRAY['{}']::jsonb[], run_at => 'infinity')$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_q', ARRAY['{}']::jsonb[], priority => NULL)$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.enqueue_batch('err_q', ARRAY['{}']::jsonb[], group_key => repeat('g', 513))$$);
-- at the limits: fine
CALL pg_temp.try($$SELECT queue.enqueue('err_ok', '{}', group_key => repeat('g', 512), dedup_key => repeat('é', 256)) > 0$$);
SELECT octet_length(group_key) AS group_key_bytes, octet_length(dedup_key) AS dedup_key_bytes
  FROM queue.jobs WHERE queue = 'err_ok' AND group_key IS NOT NULL;
SELECT count(*) AS err_ok_jobs FROM queue.jobs WHERE queue = 'err_ok';

--
-- claim
--
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('err_q', NULL)$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('err_q', 0)$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('err_q', -1)$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('err_q', 10001)$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('err_q', 2147483647)$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('err_q', 1, '0')$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('err_q', 1, '-5 seconds')$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('err_q', 1, '1 day -25 hours')$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.claim('err_q', 1, '300000 years')$$);

--
-- consuming a job: complete, fail, extend, release
--
-- NULL ids
CALL pg_temp.try($$SELECT queue.complete(NULL::bigint)$$);
CALL pg_temp.try($$SELECT queue.complete(NULL::bigint, 1)$$);
CALL pg_temp.try($$SELECT queue.fail(NULL, 'x')$$);
CALL pg_temp.try($$SELECT queue.extend(NULL, '1 minute')$$);
CALL pg_temp.try($$SELECT queue.release(NULL)$$);
-- ids no queue has
CALL pg_temp.try($$SELECT queue.complete(999999)$$);
CALL pg_temp.try($$SELECT queue.complete(0)$$);
CALL pg_temp.try($$SELECT queue.complete(-5)$$);
CALL pg_temp.try($$SELECT queue.fail(999999, 'x')$$);
CALL pg_temp.try($$SELECT queue.extend(999999, '1 minute')$$);
CALL pg_temp.try($$SELECT queue.release(999999)$$);
-- jobs that are not running
CALL pg_temp.try($$SELECT queue.complete($1)$$, :ready);
CALL pg_temp.try($$SELECT queue.fail($1, 'x')$$, :scheduled);
CALL pg_temp.try($$SELECT queue.extend($1, '1 minute')$$, :dead);
CALL pg_temp.try($$SELECT queue.release($1)$$, :ready);
-- ... that do not exist in their queue
CALL pg_temp.try($$SELECT queue.complete($1)$$, :ready + 1000000000);
-- bad arguments
CALL pg_temp.try($$SELECT queue.complete(ARRAY[$1, NULL])$$, :running);
CALL pg_temp.try($$SELECT queue.complete(ARRAY[NULL]::bigint[])$$);
CALL pg_temp.try($$SELECT queue.complete(NULL::bigint[])$$);
CALL pg_temp.try($$SELECT queue.fail($1, NULL)$$, :running);
CALL pg_temp.try($$SELECT queue.fail($1, 'x', retry_in => '-1 second')$$, :running);
CALL pg_temp.try($$SELECT queue.extend($1, NULL)$$, :running);
CALL pg_temp.try($$SELECT queue.extend($1, '0')$$, :running);
CALL pg_temp.try($$SELECT queue.extend($1, '-1 minute')$$, :running);
CALL pg_temp.try($$SELECT queue.release($1, 'infinity')$$, :running);
CALL pg_temp.try($$SELECT queue.release($1, '-infinity')$$, :running);
-- an untyped NULL could be an id or an array of ids
CALL pg_temp.try($$SELECT queue.complete(NULL)$$);

--
-- managing jobs
--
CALL pg_temp.try($$SELECT count(*) FROM queue.history(NULL)$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.history(999999)$$);
CALL pg_temp.try($$SELECT count(*) FROM queue.history($1)$$, :ready + 1000000000);
CALL pg_temp.try($$SELECT queue.reschedule(NULL, now())$$);
CALL pg_temp.try($$SELECT queue.reschedule($1, NULL)$$, :ready);
CALL pg_temp.try($$SELECT queue.reschedule($1, 'infinity')$$, :ready);
CALL pg_temp.try($$SELECT queue.reschedule($1, '-infinity')$$, :scheduled);
CALL pg_temp.try($$SELECT queue.reschedule($1, now())$$, :running);
CALL pg_temp.try($$SELECT queue.reschedule($1, now())$$, :dead);
CALL pg_temp.try($$SELECT queue.reschedule(999999, now())$$);
CALL pg_temp.try($$SELECT queue.cancel(NULL)$$);
CALL pg_temp.try($$SELECT queue.cancel($1)$$, :running);
CALL pg_temp.try($$SELECT queue.cancel(999999)$$);
CALL pg_temp.try($$SELECT queue.retry(NULL)$$);
CALL pg_temp.try($$SELECT queue.retry($1)$$, :ready);
CALL pg_temp.try($$SELECT queue.retry($1)$$, :running);
CALL pg_temp.try($$SELECT queue.retry(999999)$$);
-- purge filters must be objects
CALL pg_temp.try($$SELECT queue.purge('err_q', '[1]')$$);
CALL pg_temp.try($$SELECT queue.purge('err_q', '"companyId"')$$);
CALL pg_temp.try($$SELECT queue.purge('err_q', '3345')$$);
CALL pg_temp.try($$SELECT queue.purge('err_q', 'null')$$);

--
-- queue options
--
CALL pg_temp.try($$SELECT queue.create('err_q')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', max_attempts => 0)$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', max_attempts => -1)$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', max_attempts => 1001)$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', max_attempts => NULL)$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', lease => '0')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', lease => '-30 seconds')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', lease => '8 days')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', lease => NULL)$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', backoff_base => '-1 second')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', backoff_base => NULL)$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', backoff_base => '2 hours')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', backoff_base => '10 seconds', backoff_max => '5 seconds')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', backoff_max => NULL)$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', backoff_base => '1 year 1 second', backoff_max => '2 years')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', backoff_max => '1 year 1 second')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', backoff_max => '13 months')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', retention => '-1 day')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', retention => NULL)$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', if_not_exists => NULL)$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', max_running => 0)$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', max_running => 100001)$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', group_retry => 'retry')$$);
CALL pg_temp.try($$SELECT queue.create('err_opt', group_retry => NULL)$$);
-- bad options are refused even when the queue exists and if_not_exists is given
CALL pg_temp.try($$SELECT queue.create('err_q', max_attempts => 0, if_not_exists => true)$$);
-- alter
CALL pg_temp.try($$SELECT queue.alter('err_q', max_attempts => 0)$$);
CALL pg_temp.try($$SELECT queue.alter('err_q', lease => '-1 second')$$);
CALL pg_temp.try($$SELECT queue.alter('err_q', backoff_base => '-1 second')$$);
CALL pg_temp.try($$SELECT queue.alter('err_q', backoff_base => '2 hours')$$);
CALL pg_temp.try($$SELECT queue.alter('err_q', backoff_max => '2 years')$$);
CALL pg_temp.try($$SELECT queue.alter('err_q', max_running => -1)$$);
CALL pg_temp.try($$SELECT queue.alter('err_q', group_retry => 'Block')$$);
CALL pg_temp.try($$SELECT queue.alter('err_q', retention => '-1 second')$$);
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention, paused, max_running, group_retry
  FROM queue.queues WHERE queue LIKE 'err\_%' ORDER BY queue;
-- the limits themselves are fine
CALL pg_temp.try($$SELECT queue.create('err_limits', max_attempts => 1000, lease => '7 days', backoff_base => '0', backoff_max => '0', retention => '0')$$);
CALL pg_temp.try($$SELECT queue.alter('err_limits', max_attempts => 1)$$);
SELECT queue, max_attempts, lease, backoff_base, backoff_max, retention
  FROM queue.queues WHERE queue = 'err_limits';
CALL pg_temp.try($$SELECT queue.alter('err_limits', backoff_base => '1 year', backoff_max => '1 year')$$);
SELECT queue, backoff_base, backoff_max FROM queue.queues WHERE queue = 'err_limits';

--
-- a transaction that enqueued or claimed cannot be prepared
--
SELECT count(*) AS jobs FROM queue.jobs WHERE queue = 'err_q';
BEGIN;
SELECT queue.enqueue('err_q', '{"n": "prepared"}') > 0 AS enqueued;
PREPARE TRANSACTION 'err_enqueue';
SELECT count(*) AS jobs FROM queue.jobs WHERE queue = 'err_q';
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'err_enqueue';
BEGIN;
SELECT count(*) FROM queue.claim('err_q');
PREPARE TRANSACTION 'err_claim';
SELECT payload->>'n' AS job, state FROM queue.jobs WHERE queue = 'err_q' AND payload ? 'n' ORDER BY id;

--
-- the final state: everything above left err_q as it was set up
--
SELECT payload->>'n' AS job, state, attempt, last_error
  FROM queue.jobs WHERE queue = 'err_q' ORDER BY id;
SELECT count(*) AS archived FROM queue.archive WHERE queue = 'err_q';
SELECT queue FROM queue.queues WHERE queue LIKE 'err\_%' ORDER BY queue;

--
-- reschedule refuses a run_at of infinity, as enqueue and release do (an
-- infinite run_at would break queue.stats for every queue)
--
SELECT queue.create('err_inf');
SELECT queue.enqueue('err_inf', '{}') AS inf \gset
CREATE PROCEDURE pg_temp.sqlstate_of(sql text, id bigint)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql USING id;
    RAISE NOTICE 'accepted';
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'refused: %', SQLSTATE;
END
$$;
CALL pg_temp.sqlstate_of($$SELECT queue.reschedule($1, 'infinity')$$, :inf);
SELECT count(*) FROM queue.stats WHERE queue LIKE 'err\_%';
SELECT queue.drop('err_inf');
