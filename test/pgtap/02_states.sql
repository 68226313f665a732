-- 02_states.sql: the job state machine.
--
--   ready --claim--> running --complete--> done (queue.archive)
--   running --fail, attempts left--> ready / scheduled (backoff)
--   running --fail, last attempt--> dead --retry--> ready (a fresh set of
--                                          attempts; the number goes on)
--   running --release--> ready / scheduled (attempt not counted toward
--                                             max_attempts)
--   running --lease runs out, tick--> ready, or dead on the last attempt
--   ready / scheduled / waiting / dead --cancel--> cancelled (queue.archive)
--   scheduled --reschedule(now)--> ready
--   enqueue behind an unfinished job of its group_key --> waiting
--   waiting --the group's head finishes--> ready / scheduled
--   waiting --reschedule--> waiting
--
-- Illegal transitions raise object_not_in_prerequisite_state (55000); a
-- stale fencing token changes nothing and returns false or NULL.
--
-- The whole file is one transaction, so now() stands still while
-- clock_timestamp() moves on.  Each scenario uses a queue of its own.
BEGIN;
SELECT plan(165);

-- The state of a job as queue.jobs shows it; 'archived:<state>' once it
-- left for queue.archive; NULL if it is nowhere.
CREATE FUNCTION pg_temp.st(bigint) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce((SELECT j.state FROM queue.jobs j WHERE j.id = $1),
                    (SELECT 'archived:' || a.state FROM queue.archive a WHERE a.id = $1))
$$;
-- A job's row in queue.jobs, to compare before and after.
CREATE FUNCTION pg_temp.row_of(bigint) RETURNS jsonb LANGUAGE sql AS $$
    SELECT to_jsonb(j) FROM queue.jobs j WHERE j.id = $1
$$;
-- Make the lease of a running job run out before now() as well as before
-- clock_timestamp(), so that queue.tick() returns it whichever of the two
-- it judges leases by (the case of a lease that ran out only by the clock
-- is tested on its own, below).  Jobs claimed in this transaction are held
-- in memory until commit (src/held.c): write them back to their table
-- first, and check that the lease was moved.
CREATE FUNCTION pg_temp.expire(queue text, id bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM queue._write_back();
    EXECUTE format('UPDATE queue.%I SET lease_until = now() - interval ''1 second''
                     WHERE id = $1 AND state = ''running''', 'q_' || queue) USING id;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> 1 THEN
        RAISE EXCEPTION 'pg_temp.expire: job % is not a running row of queue.q_%', id, queue;
    END IF;
END
$$;

/* ------------------------------------------------- ready -> running -> done */

SELECT queue.create('sm');
SELECT queue.enqueue('sm', '{"n":1}', priority => 3, group_key => 'k') AS j1 \gset
SELECT is(pg_temp.st(:j1), 'ready', 'a new job is ready');
SELECT results_eq(format('SELECT attempt, claimed_at, lease_until, last_error FROM queue.jobs WHERE id = %s', :j1),
                  $$VALUES (0, NULL::timestamptz, NULL::timestamptz, NULL::text)$$,
                  'a new job has attempt 0, no claim, no lease, no error');

SELECT clock_timestamp() AS t0 \gset
CREATE TEMP TABLE c1 ON COMMIT DROP AS SELECT * FROM queue.claim('sm', lease => '1 minute');
SELECT results_eq('SELECT id, payload, attempt, group_key FROM c1',
                  format($$VALUES (%s::bigint, '{"n":1}'::jsonb, 1, 'k'::text)$$, :j1),
                  'claim returns the job with its payload, attempt 1 and group_key');
SELECT ok((SELECT c1.enqueued_at = j.enqueued_at AND c1.lease_until = j.lease_until
             FROM c1, queue.jobs j WHERE j.id = c1.id),
          'claim returns the enqueued_at and lease_until of the job');
SELECT is(pg_temp.st(:j1), 'running', 'claim: ready -> running');
SELECT ok((SELECT claimed_at >= :'t0' AND claimed_at <= clock_timestamp()
              AND lease_until >= claimed_at + interval '1 minute'
              AND lease_until <= clock_timestamp() + interval '1 minute'
             FROM queue.jobs WHERE id = :j1),
          'a running job has claimed_at and lease_until = claim time + lease');
SELECT is((SELECT count(*)::int FROM queue.claim('sm')), 0, 'a running job is not claimed again');

SELECT clock_timestamp() AS t1 \gset
SELECT ok(queue.extend(:j1, '2 hours') BETWEEN :'t1'::timestamptz + interval '2 hours'
                                          AND clock_timestamp() + interval '2 hours',
          'extend returns now + the new lease');
SELECT ok((SELECT lease_until > clock_timestamp() + interval '119 minutes' FROM queue.jobs WHERE id = :j1),
          'extend moves lease_until');
SELECT is(pg_temp.st(:j1), 'running', 'extend keeps the job running');

SELECT is(queue.complete(:j1), true, 'complete a running job returns true');
SELECT is(pg_temp.st(:j1), 'archived:done', 'complete: running -> done, in queue.archive');
SELECT results_eq(format('SELECT queue, state, payload, attempt, priority, group_key FROM queue.archive WHERE id = %s', :j1),
                  $$VALUES ('sm'::text, 'done'::text, '{"n":1}'::jsonb, 1, 3, 'k'::text)$$,
                  'the archived job keeps its queue, payload, attempt, priority and group_key');
SELECT ok((SELECT finished_at >= claimed_at AND finished_at <= clock_timestamp()
             FROM queue.archive WHERE id = :j1),
          'the archived job has finished_at');
SELECT results_eq(format('SELECT event, attempt FROM queue.history(%s)', :j1),
                  $$VALUES ('enqueued'::text, 0), ('claimed', 1), ('completed', 1)$$,
                  'history: enqueued, claimed, completed');
SELECT ok((SELECT bool_and(at IS NOT NULL) FROM queue.history(:j1)), 'every history event has a time');

SELECT throws_ok(format('SELECT queue.complete(%s)', :j1), '55000', NULL,
                 'completing a finished job without a token: 55000');
SELECT is(queue.complete(:j1, attempt => 1), false, 'completing a finished job with its token returns false');
SELECT throws_ok(format('SELECT queue.fail(%s, %L)', :j1, 'e'), '55000', NULL, 'failing a finished job: 55000');
SELECT throws_ok(format('SELECT queue.cancel(%s)', :j1), '55000', NULL, 'cancelling a finished job: 55000');
SELECT throws_ok(format('SELECT queue.retry(%s)', :j1), '55000', NULL, 'retrying a finished job: 55000');
SELECT throws_ok(format('SELECT queue.reschedule(%s, now())', :j1), '55000', NULL, 'rescheduling a finished job: 55000');

/* --------------------------------------------------- illegal transitions */

SELECT queue.enqueue('sm', '{"n":2}') AS j2 \gset
SELECT pg_temp.row_of(:j2) AS j2_row \gset
SELECT throws_ok(format('SELECT queue.complete(%s)', :j2), '55000', NULL, 'completing a ready job: 55000');
SELECT throws_ok(format('SELECT queue.fail(%s, %L)', :j2, 'e'), '55000', NULL, 'failing a ready job: 55000');
SELECT throws_ok(format('SELECT queue.extend(%s, %L)', :j2, '1 min'), '55000', NULL, 'extending a ready job: 55000');
SELECT throws_ok(format('SELECT queue.release(%s)', :j2), '55000', NULL, 'releasing a ready job: 55000');
SELECT throws_ok(format('SELECT queue.retry(%s)', :j2), '55000', NULL, 'retrying a ready job: 55000');
SELECT is(pg_temp.row_of(:j2), :'j2_row'::jsonb, 'the ready job is unchanged by the refused calls');

SELECT is((SELECT id FROM queue.claim('sm')), :j2::bigint, 'claim the second job');
SELECT pg_temp.row_of(:j2) AS j2_row \gset
SELECT throws_ok(format('SELECT queue.cancel(%s)', :j2), '55000', NULL, 'cancelling a running job: 55000');
SELECT throws_ok(format('SELECT queue.retry(%s)', :j2), '55000', NULL, 'retrying a running job: 55000');
SELECT throws_ok(format('SELECT queue.reschedule(%s, now())', :j2), '55000', NULL, 'rescheduling a running job: 55000');
SELECT is(pg_temp.row_of(:j2), :'j2_row'::jsonb, 'the running job is unchanged by the refused calls');
SELECT is(queue.complete(:j2), true, 'and it can still be completed');

-- a job id of an existing queue that was never handed out
SELECT (:j2 + 1000000 * 1000)::bigint AS nojob \gset
SELECT throws_ok(format('SELECT queue.complete(%s)', :nojob), '55000', NULL, 'completing an unknown job: 55000');
SELECT is(queue.complete(:nojob, attempt => 1), false, 'completing an unknown job with a token returns false');

SELECT throws_ok($$SELECT queue.enqueue('no_such_queue', '{}')$$, '42704', NULL, 'enqueue into an unknown queue: 42704');
SELECT throws_ok($$SELECT queue.enqueue_batch('no_such_queue', ARRAY['{}']::jsonb[])$$, '42704', NULL,
                 'enqueue_batch into an unknown queue: 42704');
SELECT throws_ok($$SELECT * FROM queue.claim('no_such_queue')$$, '42704', NULL, 'claim from an unknown queue: 42704');
SELECT throws_ok($$SELECT queue.purge('no_such_queue')$$, '42704', NULL, 'purge of an unknown queue: 42704');
SELECT throws_ok($$SELECT queue.enqueue('Emails', '{}')$$, '42602', NULL, 'enqueue with an upper-case queue name: 42602');
SELECT throws_ok($$SELECT queue.enqueue('bad-name', '{}')$$, '42602', NULL, 'enqueue with a hyphen in the queue name: 42602');
SELECT throws_ok($$SELECT * FROM queue.claim('1abc')$$, '42602', NULL, 'claim with a name starting with a digit: 42602');
SELECT throws_ok($$SELECT queue.enqueue('', '{}')$$, '42602', NULL, 'enqueue with an empty queue name: 42602');

SELECT throws_ok($$SELECT queue.enqueue('sm', '[1, 2]')$$, '22023', NULL, 'a JSON array payload: 22023');
SELECT throws_ok($$SELECT queue.enqueue('sm', '42')$$, '22023', NULL, 'a JSON number payload: 22023');
SELECT throws_ok($$SELECT queue.enqueue('sm', '"text"')$$, '22023', NULL, 'a JSON string payload: 22023');
SELECT throws_ok($$SELECT queue.enqueue('sm', 'null')$$, '22023', NULL, 'a JSON null payload: 22023');
SELECT throws_ok($$SELECT queue.enqueue('sm', NULL)$$, '22004', NULL, 'an SQL NULL payload: 22004');
SELECT throws_ok($$SELECT queue.enqueue_batch('sm', ARRAY['{}', '[]']::jsonb[])$$, '22023', NULL,
                 'enqueue_batch with a non-object element: 22023');
SELECT throws_ok($$SELECT queue.enqueue_batch('sm', ARRAY['{}', NULL]::jsonb[])$$, '22004', NULL,
                 'enqueue_batch with a NULL element: 22004');
SELECT is((SELECT count(*)::int FROM queue.jobs WHERE queue = 'sm'), 0, 'refused enqueues added nothing');

/* ------------------------------------ fail: retry with backoff, then dead */

SELECT queue.create('fl', max_attempts => 3, backoff_base => '10 seconds', backoff_max => '1 hour');
SELECT queue.enqueue('fl', '{"n":3}') AS j3 \gset

SELECT is((SELECT attempt FROM queue.claim('fl')), 1, 'attempt 1');
SELECT clock_timestamp() AS t0 \gset
SELECT is(queue.fail(:j3, 'boom'), 'retry', 'fail with attempts left returns retry');
SELECT clock_timestamp() AS t1 \gset
SELECT is(pg_temp.st(:j3), 'scheduled', 'fail with a backoff: running -> scheduled');
SELECT results_eq(format('SELECT attempt, last_error, lease_until FROM queue.jobs WHERE id = %s', :j3),
                  $$VALUES (1, 'boom'::text, NULL::timestamptz)$$,
                  'a failed job keeps its attempt, records last_error and loses its lease');
SELECT ok((SELECT run_at BETWEEN :'t0'::timestamptz + interval '5 seconds' AND :'t1'::timestamptz + interval '10 seconds'
             FROM queue.jobs WHERE id = :j3),
          'first backoff is backoff_base, shortened by at most half (5 s .. 10 s)');
SELECT is((SELECT count(*)::int FROM queue.claim('fl')), 0, 'a backed-off job is not claimed before its time');

SELECT lives_ok(format('SELECT queue.reschedule(%s, now())', :j3), 'reschedule a scheduled job to now');
SELECT is(pg_temp.st(:j3), 'ready', 'reschedule(now): scheduled -> ready');
SELECT is((SELECT attempt FROM queue.claim('fl')), 2, 'attempt 2');
SELECT clock_timestamp() AS t0 \gset
SELECT is(queue.fail(:j3, 'again'), 'retry', 'second failure: retry');
SELECT clock_timestamp() AS t1 \gset
SELECT ok((SELECT run_at BETWEEN :'t0'::timestamptz + interval '10 seconds' AND :'t1'::timestamptz + interval '20 seconds'
             FROM queue.jobs WHERE id = :j3),
          'second backoff is backoff_base * 2, shortened by at most half (10 s .. 20 s)');
SELECT lives_ok(format('SELECT queue.reschedule(%s, now())', :j3), 'reschedule to now again');

SELECT is((SELECT attempt FROM queue.claim('fl')), 3, 'attempt 3, the last');
SELECT is(queue.fail(:j3, 'final'), 'dead', 'fail on the last attempt returns dead');
SELECT is(pg_temp.st(:j3), 'dead', 'running -> dead');
SELECT results_eq(format('SELECT attempt, max_attempts, last_error, lease_until FROM queue.jobs WHERE id = %s', :j3),
                  $$VALUES (3, 3, 'final'::text, NULL::timestamptz)$$,
                  'a dead job keeps its attempt count and last error');
SELECT is((SELECT count(*)::int FROM queue.claim('fl')), 0, 'a dead job is not claimed');
SELECT throws_ok(format('SELECT queue.fail(%s, %L)', :j3, 'e'), '55000', NULL, 'failing a dead job: 55000');
SELECT throws_ok(format('SELECT queue.complete(%s)', :j3), '55000', NULL, 'completing a dead job: 55000');
SELECT throws_ok(format('SELECT queue.release(%s)', :j3), '55000', NULL, 'releasing a dead job: 55000');

SELECT lives_ok(format('SELECT queue.retry(%s)', :j3), 'retry a dead job');
SELECT is(pg_temp.st(:j3), 'ready', 'retry: dead -> ready');
SELECT is((SELECT attempt FROM queue.jobs WHERE id = :j3), 3, 'retry keeps the attempt number');
SELECT throws_ok(format('SELECT queue.retry(%s)', :j3), '55000', NULL, 'retrying it again (now ready): 55000');
-- Attempt numbers never repeat, so a token of the job's first life (a
-- consumer that lost its lease long ago) cannot finish its second.
SELECT is((SELECT attempt FROM queue.claim('fl')), 4, 'a retried job is claimed as attempt 4');
SELECT is(queue.complete(:j3, 1), false, 'a token from before the retry finishes nothing');
SELECT is(queue.fail(:j3, 'once more', retry_in => '0'), 'retry', 'fail with retry_in => 0: the attempts before the retry do not count');
SELECT is(pg_temp.st(:j3), 'ready', 'fail with retry_in => 0: running -> ready');
SELECT is((SELECT attempt FROM queue.claim('fl')), 5, 'and it is claimable at once, as attempt 5');
SELECT is(queue.complete(:j3), true, 'complete after a retry');
SELECT is(pg_temp.st(:j3), 'archived:done', 'done');
SELECT is((SELECT last_error FROM queue.archive WHERE id = :j3), 'once more', 'the archive keeps last_error');

-- Events that management functions stamp (rescheduled, retried) may sort
-- differently inside one transaction; the claims and failures are in order.
SELECT results_eq(format($$SELECT event, attempt, detail FROM queue.history(%s)
                           WHERE event IN ('enqueued', 'claimed', 'failed', 'completed')$$, :j3),
                  $$VALUES ('enqueued'::text, 0, NULL::text), ('claimed', 1, NULL), ('failed', 1, 'boom'),
                           ('claimed', 2, NULL), ('failed', 2, 'again'), ('claimed', 3, NULL), ('failed', 3, 'final'),
                           ('claimed', 4, NULL), ('failed', 4, 'once more'), ('claimed', 5, NULL), ('completed', 5, NULL)$$,
                  'history: each claim and each failure with its error, in order');
SELECT results_eq(format($$SELECT event, count(*)::int FROM queue.history(%s)
                           WHERE event IN ('rescheduled', 'retried') GROUP BY 1 ORDER BY 1$$, :j3),
                  $$VALUES ('rescheduled'::text, 2), ('retried', 1)$$,
                  'history records the reschedules and the retry');

-- backoff_max caps the backoff
SELECT queue.create('cap', max_attempts => 10, backoff_base => '10 seconds', backoff_max => '15 seconds');
SELECT queue.enqueue('cap', '{}') AS jc \gset
SELECT count(*) AS skip_n FROM queue.claim('cap') \gset
SELECT queue.fail(:jc, 'e1', retry_in => '0') AS skip_s \gset
SELECT count(*) AS skip_n FROM queue.claim('cap') \gset
SELECT queue.fail(:jc, 'e2', retry_in => '0') AS skip_s \gset
SELECT is((SELECT attempt FROM queue.claim('cap')), 3, 'attempt 3 of a queue with a low backoff_max');
SELECT clock_timestamp() AS t0 \gset
SELECT is(queue.fail(:jc, 'e3'), 'retry', 'third failure');
SELECT clock_timestamp() AS t1 \gset
SELECT ok((SELECT run_at BETWEEN :'t0'::timestamptz + interval '7.5 seconds' AND :'t1'::timestamptz + interval '15 seconds'
             FROM queue.jobs WHERE id = :jc),
          'backoff 10 s * 2^2 is capped at backoff_max 15 s (7.5 s .. 15 s with jitter)');

/* ------------------------------------------------------------- release */

SELECT queue.create('rl');
SELECT queue.enqueue('rl', '{"n":4}') AS j4 \gset
SELECT is((SELECT attempt FROM queue.claim('rl')), 1, 'claimed: attempt 1');
SELECT is(queue.release(:j4), true, 'release a running job returns true');
SELECT is(pg_temp.st(:j4), 'ready', 'release: running -> ready');
SELECT results_eq(format('SELECT attempt, lease_until FROM queue.jobs WHERE id = %s', :j4),
                  $$VALUES (1, NULL::timestamptz)$$,
                  'release keeps the attempt (it counts claims) and drops the lease');
SELECT is((SELECT attempt FROM queue.claim('rl')), 2, 'claimed again: attempt 2');
SELECT is(queue.complete(:j4, attempt => 1), false,
          'the token of the claim before the release is stale: complete returns false');
SELECT is(queue.release(:j4, attempt => 1), false, 'and release returns false');
SELECT is(pg_temp.st(:j4), 'running', 'the job still runs for the current claim');
SELECT is(queue.release(:j4, run_at => clock_timestamp() + interval '1 hour'), true, 'release with a later run_at');
SELECT is(pg_temp.st(:j4), 'scheduled', 'release(run_at => later): running -> scheduled');
SELECT is((SELECT count(*)::int FROM queue.claim('rl')), 0, 'a job released to later is not claimed now');
SELECT results_eq(format('SELECT event, attempt FROM queue.history(%s)', :j4),
                  $$VALUES ('enqueued'::text, 0), ('claimed', 1), ('released', 1), ('claimed', 2), ('released', 2)$$,
                  'history: enqueued, claimed, released, claimed, released');

-- Released attempts do not count toward max_attempts.
SELECT queue.create('ru', max_attempts => 2, backoff_base => '0');
SELECT queue.enqueue('ru', '{}') AS ju \gset
SELECT is((SELECT attempt FROM queue.claim('ru')), 1, 'claimed: attempt 1 of at most 2');
SELECT is(queue.release(:ju), true, 'released');
SELECT is((SELECT attempt FROM queue.claim('ru')), 2, 'claimed again: attempt 2');
SELECT is(queue.fail(:ju, 'first failure'), 'retry',
          'failing attempt 2 is the first counted attempt of 2: retry, not dead');
SELECT is((SELECT attempt FROM queue.claim('ru')), 3, 'claimed: attempt 3');
SELECT is(queue.fail(:ju, 'second failure'), 'dead', 'the second counted attempt is the last: dead');
SELECT results_eq(format('SELECT state, attempt, max_attempts FROM queue.jobs WHERE id = %s', :ju),
                  $$VALUES ('dead'::text, 3, 2)$$,
                  'dead with 3 claims, one of them released, of max_attempts 2');

/* -------------------------------------------------------------- cancel */

SELECT queue.create('cn');
SELECT queue.enqueue('cn', '{"n":5}') AS j5, queue.enqueue('cn', '{"n":6}', delay => '1 hour') AS j6 \gset
SELECT is(pg_temp.st(:j6), 'scheduled', 'a job enqueued with a delay is scheduled');
SELECT lives_ok(format('SELECT queue.cancel(%s)', :j5), 'cancel a ready job');
SELECT is(pg_temp.st(:j5), 'archived:cancelled', 'cancel: ready -> cancelled, in queue.archive');
SELECT lives_ok(format('SELECT queue.cancel(%s)', :j6), 'cancel a scheduled job');
SELECT is(pg_temp.st(:j6), 'archived:cancelled', 'cancel: scheduled -> cancelled');
SELECT results_eq(format('SELECT event FROM queue.history(%s)', :j5),
                  $$VALUES ('enqueued'::text), ('cancelled')$$,
                  'history: enqueued, cancelled');
SELECT throws_ok(format('SELECT queue.cancel(%s)', :j5), '55000', NULL, 'cancelling a cancelled job: 55000');
SELECT is((SELECT count(*)::int FROM queue.claim('cn')), 0, 'cancelled jobs are not claimed');

SELECT queue.create('cd', max_attempts => 1);
SELECT queue.enqueue('cd', '{}') AS j7 \gset
SELECT count(*) AS skip_n FROM queue.claim('cd') \gset
SELECT is(queue.fail(:j7, 'x'), 'dead', 'a job dies on its only attempt');
SELECT lives_ok(format('SELECT queue.cancel(%s)', :j7), 'cancel a dead job (it is not running)');
SELECT is(pg_temp.st(:j7), 'archived:cancelled', 'cancel: dead -> cancelled');

/* ------------------------------------------------------ expired leases */

SELECT queue.create('ls', max_attempts => 2);
SELECT queue.enqueue('ls', '{"n":8}') AS j8 \gset
SELECT is((SELECT attempt FROM queue.claim('ls', lease => '1 millisecond')), 1, 'claimed with a 1 ms lease');
SELECT pg_sleep(0.01);
SELECT ok((SELECT lease_until < clock_timestamp() FROM queue.jobs WHERE id = :j8), 'the lease ran out');
SELECT pg_temp.expire('ls', :j8);
SELECT results_eq($$SELECT expired FROM queue.tick() WHERE queue = 'ls'$$, $$VALUES (1::bigint)$$,
                  'tick returns one expired lease');
SELECT is(pg_temp.st(:j8), 'ready', 'expired lease: running -> ready');
SELECT results_eq(format('SELECT attempt, lease_until, last_error FROM queue.jobs WHERE id = %s', :j8),
                  $$VALUES (1, NULL::timestamptz, 'lease expired'::text)$$,
                  'the expired attempt counts; last_error says the lease expired');
SELECT is((SELECT attempt FROM queue.claim('ls', lease => '1 millisecond')), 2, 'claimed again: attempt 2, the last');
SELECT pg_temp.expire('ls', :j8);
SELECT results_eq($$SELECT expired FROM queue.tick() WHERE queue = 'ls'$$, $$VALUES (1::bigint)$$,
                  'tick returns the second expired lease');
SELECT is(pg_temp.st(:j8), 'dead', 'expired lease on the last attempt: running -> dead');
SELECT is((SELECT attempt FROM queue.jobs WHERE id = :j8), 2, 'the dead job has used its 2 attempts');
SELECT results_eq(format($$SELECT event, attempt FROM queue.history(%s) ORDER BY attempt, event$$, :j8),
                  $$VALUES ('enqueued'::text, 0), ('claimed', 1), ('lease expired', 1),
                           ('claimed', 2), ('lease expired', 2)$$,
                  'history: enqueued, then a claim and an expired lease for each attempt');
SELECT queue.enqueue('ls', '{"n":"long"}') AS jlong \gset
SELECT is((SELECT id FROM queue.claim('ls', lease => '1 hour')), :jlong::bigint, 'claim another job with a long lease');
SELECT results_eq($$SELECT expired FROM queue.tick() WHERE queue = 'ls'$$, $$VALUES (0::bigint)$$,
                  'tick expires nothing when no lease ran out');
SELECT is(pg_temp.st(:jlong), 'running', 'a job whose lease has not run out stays running');

-- Without help: a lease that ran out while this transaction was open is
-- one that ran out, and queue.tick() is the worker's pass.
SELECT queue.create('lt');
SELECT queue.enqueue('lt', '{}') AS jt \gset
SELECT is((SELECT attempt FROM queue.claim('lt', lease => '1 millisecond')), 1, 'claimed with a 1 ms lease');
SELECT pg_sleep(0.01);
SELECT results_eq($$SELECT expired FROM queue.tick() WHERE queue = 'lt'$$, $$VALUES (1::bigint)$$,
                  'tick returns a lease that ran out 10 ms ago (inside the caller''s transaction too)');
SELECT is(pg_temp.st(:jt), 'ready', 'and the job is ready again');

/* ------------------------------------------------------------- fencing */

SELECT queue.create('fe', max_attempts => 5);
SELECT queue.enqueue('fe', '{"n":9}') AS j9 \gset
SELECT is((SELECT attempt FROM queue.claim('fe', lease => '1 millisecond')), 1, 'consumer A claims: attempt 1');
SELECT pg_temp.expire('fe', :j9);
SELECT results_eq($$SELECT expired FROM queue.tick() WHERE queue = 'fe'$$, $$VALUES (1::bigint)$$,
                  'A''s lease runs out');
SELECT is((SELECT attempt FROM queue.claim('fe', lease => '10 minutes')), 2, 'consumer B claims: attempt 2');
SELECT pg_temp.row_of(:j9) AS j9_row \gset
SELECT is(queue.complete(:j9, attempt => 1), false, 'complete with A''s stale token returns false');
SELECT is(queue.fail(:j9, 'stale', attempt => 1), NULL, 'fail with a stale token returns NULL');
SELECT is(queue.extend(:j9, '1 hour', attempt => 1), NULL, 'extend with a stale token returns NULL');
SELECT is(queue.release(:j9, attempt => 1), false, 'release with a stale token returns false');
SELECT is(queue.complete(ARRAY[:j9 + 1000000]::bigint[]), 0::bigint, 'complete(ids) ignores jobs that are not running');
SELECT is(pg_temp.row_of(:j9), :'j9_row'::jsonb, 'the stale calls left the job row unchanged');
SELECT is(pg_temp.st(:j9), 'running', 'still running for consumer B');
SELECT isnt(queue.extend(:j9, '1 hour', attempt => 2), NULL, 'extend with the current token works');
SELECT is(queue.complete(:j9, attempt => 2), true, 'complete with the current token works');
SELECT is(queue.complete(:j9, attempt => 2), false, 'completing again with the token returns false');
SELECT is(pg_temp.st(:j9), 'archived:done', 'done once');

/* ------------------------------- claim: what a ready job must guarantee */

-- A transaction that makes a job ready can claim it itself (the one-
-- transaction way of consuming), whatever its priority.
SELECT queue.create('pr');
SELECT queue.enqueue('pr', '{"n":"low"}') AS jl \gset
SELECT is((SELECT id FROM queue.claim('pr')), :jl::bigint, 'claim the only job');
SELECT queue.enqueue('pr', '{"n":"high"}', priority => 5) AS jh \gset
SELECT is((SELECT id FROM queue.claim('pr')), :jh::bigint,
          'a higher-priority job enqueued after a claim in the same transaction is claimable');

-- Jobs with the same group_key run one at a time, in id order.
SELECT queue.create('gk');
SELECT queue.enqueue('gk', '{"n":1}', group_key => 'g') AS g1,
       queue.enqueue('gk', '{"n":2}', group_key => 'g') AS g2 \gset
SELECT is(pg_temp.st(:g1), 'ready', 'the first job of a group is ready');
SELECT is(pg_temp.st(:g2), 'waiting', 'the second job of the group waits');
SELECT results_eq($$SELECT id FROM queue.claim('gk', 2)$$, format('VALUES (%s::bigint)', :g1),
                  'of two jobs of one group_key, claim takes only the first');
SELECT is((SELECT count(*)::int FROM queue.claim('gk')), 0, 'the second waits while the first runs');
SELECT lives_ok(format('SELECT queue.reschedule(%s, now(), priority => 2)', :g2), 'reschedule a waiting job');
SELECT results_eq(format('SELECT state, priority FROM queue.jobs WHERE id = %s', :g2),
                  $$VALUES ('waiting'::text, 2)$$,
                  'reschedule: waiting -> waiting, with the new priority');
SELECT throws_ok(format('SELECT queue.complete(%s)', :g2), '55000', NULL, 'completing a waiting job: 55000');
SELECT throws_ok(format('SELECT queue.retry(%s)', :g2), '55000', NULL, 'retrying a waiting job: 55000');
SELECT is(queue.complete(:g1), true, 'the first completes');
SELECT is(pg_temp.st(:g2), 'ready', 'when the head finishes: waiting -> ready');
SELECT is((SELECT id FROM queue.claim('gk')), :g2::bigint, 'then the second is claimed');
SELECT queue.enqueue('gk', '{"n":3}', group_key => 'g') AS g3 \gset
SELECT is(pg_temp.st(:g3), 'waiting', 'a job enqueued while its group''s head runs waits');
SELECT lives_ok(format('SELECT queue.cancel(%s)', :g3), 'cancel a waiting job');
SELECT is(pg_temp.st(:g3), 'archived:cancelled', 'cancel: waiting -> cancelled');

SELECT * FROM finish();
ROLLBACK;
