--
-- fail.sql: queue.fail, queue.extend and queue.release.
--
-- Queues of this file are named fl_*.  Backoffs are checked against
-- clock_timestamp() read just before and just after the call, so the
-- bounds are exact and do not depend on how fast the test runs.
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

--
-- fail with attempts left: 'retry' after a backoff of
-- backoff_base * 2^(attempt-1), capped at backoff_max, shortened by at
-- most half by jitter.  Here base 1 hour, max 10 hours.
--
SELECT queue.create('fl_backoff', backoff_base => '1 hour', backoff_max => '10 hours', max_attempts => 10);
SELECT queue.enqueue('fl_backoff', '{"n": 1}') AS b1 \gset
-- attempt 1: between 30 minutes and 1 hour
SELECT attempt FROM queue.claim('fl_backoff');
SELECT clock_timestamp() AS t0 \gset
SELECT queue.fail(:b1, 'connection refused');
SELECT clock_timestamp() AS t1 \gset
SELECT state, attempt, last_error, claimed_at IS NOT NULL AS claimed_at_kept, lease_until,
       run_at >= :'t0'::timestamptz + interval '30 minutes' AS not_too_early,
       run_at <= :'t1'::timestamptz + interval '1 hour' AS not_too_late
  FROM queue.jobs WHERE id = :b1;
-- not claimable while it backs off
SELECT count(*) FROM queue.claim('fl_backoff');
-- attempt 2: between 1 and 2 hours
SELECT queue.reschedule(:b1, now());
SELECT attempt FROM queue.claim('fl_backoff');
SELECT clock_timestamp() AS t0 \gset
SELECT queue.fail(:b1, 'timeout');
SELECT clock_timestamp() AS t1 \gset
SELECT state, attempt, last_error,
       run_at >= :'t0'::timestamptz + interval '1 hour' AS not_too_early,
       run_at <= :'t1'::timestamptz + interval '2 hours' AS not_too_late
  FROM queue.jobs WHERE id = :b1;
-- attempt 3: between 2 and 4 hours
SELECT queue.reschedule(:b1, now());
SELECT attempt FROM queue.claim('fl_backoff');
SELECT clock_timestamp() AS t0 \gset
SELECT queue.fail(:b1, 'timeout');
SELECT clock_timestamp() AS t1 \gset
SELECT state, attempt,
       run_at >= :'t0'::timestamptz + interval '2 hours' AS not_too_early,
       run_at <= :'t1'::timestamptz + interval '4 hours' AS not_too_late
  FROM queue.jobs WHERE id = :b1;
-- attempt 5 would be 16 hours: capped at 10 hours (between 5 and 10)
SELECT queue.reschedule(:b1, now());
SELECT attempt FROM queue.claim('fl_backoff');
SELECT queue.fail(:b1, 'timeout');
SELECT queue.reschedule(:b1, now());
SELECT attempt FROM queue.claim('fl_backoff');
SELECT clock_timestamp() AS t0 \gset
SELECT queue.fail(:b1, 'timeout');
SELECT clock_timestamp() AS t1 \gset
SELECT state, attempt,
       run_at >= :'t0'::timestamptz + interval '5 hours' AS not_too_early,
       run_at <= :'t1'::timestamptz + interval '10 hours' AS not_too_late
  FROM queue.jobs WHERE id = :b1;

-- jitter never lengthens and at most halves: twenty jobs failing their first attempt
SELECT queue.create('fl_jitter', backoff_base => '10 minutes');
SELECT count(*) FROM queue.enqueue_batch('fl_jitter', array_fill('{}'::jsonb, ARRAY[20]));
SELECT count(*) FROM queue.claim('fl_jitter', 20);
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) FILTER (WHERE queue.fail(id, 'x') = 'retry') AS retried
  FROM queue.jobs WHERE queue = 'fl_jitter';
SELECT clock_timestamp() AS t1 \gset
SELECT count(*) AS jobs,
       bool_and(state = 'scheduled') AS all_scheduled,
       bool_and(run_at >= :'t0'::timestamptz + interval '5 minutes') AS none_too_early,
       bool_and(run_at <= :'t1'::timestamptz + interval '10 minutes') AS none_too_late
  FROM queue.jobs WHERE queue = 'fl_jitter';

--
-- backoff_base 0: ready again at once
--
SELECT queue.create('fl_now', backoff_base => '0', backoff_max => '0');
SELECT queue.enqueue('fl_now', '{"n": 1}') AS n1 \gset
SELECT attempt FROM queue.claim('fl_now');
SELECT queue.fail(:n1, 'flaky');
SELECT state, attempt, last_error, run_at <= now() AS due FROM queue.jobs WHERE id = :n1;
SELECT payload, attempt FROM queue.claim('fl_now');

--
-- retry_in overrides the backoff, without jitter
--
SELECT queue.create('fl_retry_in', backoff_base => '1 hour');
SELECT queue.enqueue('fl_retry_in', '{"n": 1}') AS r1 \gset
SELECT count(*) FROM queue.claim('fl_retry_in');
SELECT clock_timestamp() AS t0 \gset
SELECT queue.fail(:r1, 'rate limited', retry_in => '10 minutes');
SELECT clock_timestamp() AS t1 \gset
SELECT state, attempt, last_error,
       run_at BETWEEN :'t0'::timestamptz + interval '10 minutes'
                  AND :'t1'::timestamptz + interval '10 minutes' AS exact
  FROM queue.jobs WHERE id = :r1;
-- retry_in 0: ready at once
SELECT queue.reschedule(:r1, now());
SELECT attempt FROM queue.claim('fl_retry_in');
SELECT queue.fail(:r1, 'again', '0');
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :r1;
SELECT attempt FROM queue.claim('fl_retry_in');

--
-- dead after max_attempts, with the last error
--
SELECT queue.create('fl_dead', max_attempts => 3, backoff_base => '0');
SELECT queue.enqueue('fl_dead', '{"n": 1}') AS d1 \gset
SELECT attempt FROM queue.claim('fl_dead');
SELECT queue.fail(:d1, 'error 1');
SELECT attempt FROM queue.claim('fl_dead');
SELECT queue.fail(:d1, 'error 2');
SELECT attempt FROM queue.claim('fl_dead');
-- retry_in does not keep a job alive past its last attempt
SELECT queue.fail(:d1, 'error 3', retry_in => '1 second');
SELECT state, attempt, max_attempts, last_error, lease_until FROM queue.jobs WHERE id = :d1;
SELECT count(*) FROM queue.claim('fl_dead');
-- max_attempts 1: the first failure is final
SELECT queue.create('fl_once', max_attempts => 1);
SELECT queue.enqueue('fl_once', '{"n": 1}') AS o1 \gset
SELECT count(*) FROM queue.claim('fl_once');
SELECT queue.fail(:o1, 'no retries');
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :o1;

--
-- the fencing token: a stale one changes nothing and returns NULL
--
SELECT queue.create('fl_token', backoff_base => '0');
SELECT queue.enqueue('fl_token', '{"n": 1}') AS k1 \gset
SELECT attempt FROM queue.claim('fl_token');
SELECT queue.fail(:k1, 'first', attempt => 1);
SELECT attempt FROM queue.claim('fl_token');
SELECT queue.fail(:k1, 'stale', attempt => 1) IS NULL AS stale_is_null;
SELECT queue.fail(:k1, 'stale', NULL, 3) IS NULL AS future_is_null;
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :k1;
SELECT queue.fail(:k1, 'second', attempt => 2);
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :k1;
-- a token for a job that is not running, or unknown: NULL too
SELECT queue.fail(:k1, 'not running', attempt => 2) IS NULL AS not_running_is_null;
SELECT queue.fail(999999, 'unknown', attempt => 1) IS NULL AS unknown_is_null;

--
-- failing a job that is not running, without a token, is an error
--
CALL pg_temp.try($$SELECT queue.fail($1, 'boom')$$, :k1);
CALL pg_temp.try($$SELECT queue.fail($1, 'boom')$$, :o1);
CALL pg_temp.try($$SELECT queue.fail($1, 'boom')$$, :k1 + 1000000000);
CALL pg_temp.try($$SELECT queue.fail(999999, 'boom')$$);
SELECT state, attempt, last_error FROM queue.jobs WHERE id IN (:k1, :o1) ORDER BY id;

--
-- long error texts are kept, up to 64 kB
--
SELECT queue.create('fl_long', backoff_base => '0');
SELECT queue.enqueue('fl_long', '{}') AS g1 \gset
SELECT count(*) FROM queue.claim('fl_long');
SELECT queue.fail(:g1, repeat('x', 70000));
SELECT length(last_error), right(last_error, 20) FROM queue.jobs WHERE id = :g1;
SELECT count(*) FROM queue.claim('fl_long');
SELECT queue.fail(:g1, repeat('é', 65536));
SELECT length(last_error), octet_length(last_error) FROM queue.jobs WHERE id = :g1;
SELECT count(*) FROM queue.claim('fl_long');
SELECT queue.fail(:g1, '');
SELECT last_error = '' AS empty_kept FROM queue.jobs WHERE id = :g1;

--
-- fail is transactional
--
SELECT queue.create('fl_tx', backoff_base => '0');
SELECT queue.enqueue('fl_tx', '{}') AS x1 \gset
SELECT count(*) FROM queue.claim('fl_tx');
BEGIN;
SELECT queue.fail(:x1, 'rolled back');
ROLLBACK;
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :x1;

--
-- extend: push the lease out
--
SELECT queue.create('fl_extend', lease => '1 minute', backoff_base => '0');
SELECT queue.enqueue('fl_extend', '{"n": 1}') AS e1 \gset
SELECT attempt FROM queue.claim('fl_extend');
SELECT clock_timestamp() AS t0 \gset
SELECT queue.extend(:e1, '1 hour') AS until \gset
SELECT clock_timestamp() AS t1 \gset
SELECT :'until'::timestamptz BETWEEN :'t0'::timestamptz + interval '1 hour'
                                 AND :'t1'::timestamptz + interval '1 hour' AS one_hour_from_now;
SELECT state, attempt, lease_until = :'until' AS lease_is_until FROM queue.jobs WHERE id = :e1;
-- it may also shorten the lease
SELECT queue.extend(:e1, '10 seconds') - now() < interval '15 seconds' AS shorter;
-- with the right token
SELECT queue.extend(:e1, '2 hours', 1) - now() >= interval '2 hours' AS with_token;
-- a stale token: NULL, and the lease is unchanged
SELECT lease_until AS before FROM queue.jobs WHERE id = :e1 \gset
SELECT queue.extend(:e1, '5 hours', 2) IS NULL AS stale_is_null;
SELECT queue.extend(:e1, '5 hours', attempt => 0) IS NULL AS stale_is_null;
SELECT lease_until = :'before' AS unchanged FROM queue.jobs WHERE id = :e1;
-- a job that is not running: an error without a token, NULL with one
SELECT queue.fail(:e1, 'to ready');
CALL pg_temp.try($$SELECT queue.extend($1, '1 hour')$$, :e1);
SELECT queue.extend(:e1, '1 hour', 1) IS NULL AS not_running_is_null;
CALL pg_temp.try($$SELECT queue.extend(999999, '1 hour')$$);
SELECT state, lease_until FROM queue.jobs WHERE id = :e1;
-- bad leases are errors, and change nothing
SELECT attempt FROM queue.claim('fl_extend');
SELECT lease_until AS before FROM queue.jobs WHERE id = :e1 \gset
CALL pg_temp.try($$SELECT queue.extend($1, '0')$$, :e1);
CALL pg_temp.try($$SELECT queue.extend($1, '-1 minute')$$, :e1);
CALL pg_temp.try($$SELECT queue.extend($1, NULL)$$, :e1);
SELECT state, attempt, lease_until = :'before' AS unchanged FROM queue.jobs WHERE id = :e1;

--
-- release: give a job back without counting the attempt toward
-- max_attempts.  attempt still counts claims and keeps going up, so the
-- token of a claim from before a release never matches a later claim.
--
SELECT queue.create('fl_release', max_attempts => 2, backoff_base => '1 hour');
SELECT queue.enqueue('fl_release', '{"n": 1}') AS l1 \gset
SELECT queue.enqueue('fl_release', '{"n": 2}') AS l2 \gset
SELECT payload, attempt FROM queue.claim('fl_release');
SELECT queue.release(:l1);
SELECT state, attempt, lease_until, last_error, run_at <= now() AS due FROM queue.jobs WHERE id = :l1;
-- claimable again, as attempt 2
SELECT payload, attempt FROM queue.claim('fl_release', 2) ORDER BY payload->>'n';
-- the token of the released claim is stale now
SELECT queue.complete(:l1, 1);
SELECT queue.fail(:l1, 'stale', attempt => 1) IS NULL AS stale_is_null;
SELECT queue.release(:l1, attempt => 1);
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :l1;
-- releasing does not use up attempts: max_attempts is 2, yet it can be
-- claimed and released many times
SELECT queue.release(:l1);
SELECT attempt FROM queue.claim('fl_release');
SELECT queue.release(:l1, attempt => 3);
SELECT attempt FROM queue.claim('fl_release');
SELECT queue.release(:l1);
SELECT attempt FROM queue.claim('fl_release');
-- the first real failure is the first of its 2 attempts: retried, with
-- the first backoff (between 30 minutes and 1 hour)
SELECT clock_timestamp() AS t0 \gset
SELECT queue.fail(:l1, 'one real failure');
SELECT clock_timestamp() AS t1 \gset
SELECT state, attempt,
       run_at >= :'t0'::timestamptz + interval '30 minutes' AS not_too_early,
       run_at <= :'t1'::timestamptz + interval '1 hour' AS not_too_late
  FROM queue.jobs WHERE id = :l1;
-- and the second real failure is the last
SELECT queue.reschedule(:l1, now());
SELECT attempt FROM queue.claim('fl_release');
SELECT queue.fail(:l1, 'second real failure');
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :l1;
-- release with a run_at in the future: scheduled at that time
SELECT now() + interval '1 hour' AS later \gset
SELECT queue.release(:l2, :'later');
SELECT state, attempt, run_at = :'later' AS at_later FROM queue.jobs WHERE id = :l2;
SELECT count(*) FROM queue.claim('fl_release');
-- release with a run_at in the past: ready
SELECT queue.reschedule(:l2, now());
SELECT attempt FROM queue.claim('fl_release');
SELECT queue.release(:l2, now() - interval '1 minute');
SELECT state, attempt FROM queue.jobs WHERE id = :l2;
-- a stale token: false and nothing changes (attempt 3 holds it now)
SELECT attempt FROM queue.claim('fl_release');
SELECT queue.release(:l2, attempt => 2);
SELECT queue.release(:l2, NULL, 0);
SELECT queue.release(:l2, attempt => 4);
SELECT state, attempt FROM queue.jobs WHERE id = :l2;
-- released, it is not running: releasing it again is an error without a
-- token, false with one
SELECT queue.release(:l2, attempt => 3);
CALL pg_temp.try($$SELECT queue.release($1)$$, :l2);
SELECT queue.release(:l2, attempt => 3);
CALL pg_temp.try($$SELECT queue.release(999999)$$);
CALL pg_temp.try($$SELECT queue.release($1, 'infinity')$$, :l2);
CALL pg_temp.try($$SELECT queue.release(NULL)$$);
SELECT state, attempt FROM queue.jobs WHERE id = :l2;
-- the history shows each claim with its own attempt
SELECT event, attempt FROM queue.history(:l2);
