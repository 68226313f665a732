--
-- ratelimit.sql: a queue's rate limit (rate_limit jobs claimed per
-- rate_period, a token bucket in shared memory).
--
-- Queues of this file are named rl_*.  Most limits here are per hour, so
-- that no token comes back while a test runs: what a claim gets is what
-- the bucket had.  Jobs are printed by their payload.
--
\set SHOW_CONTEXT never

CREATE FUNCTION pg_temp.fill(q text, n int)
RETURNS void
LANGUAGE sql AS $$
    SELECT count(*) FROM queue.enqueue_batch(q, (SELECT array_agg(jsonb_build_object('n', i)) FROM generate_series(1, n) i))
$$;

-- A full bucket is spent at once; then claims get nothing, though jobs
-- are ready.
SELECT queue.create('rl_a', rate_limit => 3, rate_period => '1 hour');
SELECT rate_limit, rate_period FROM queue.queues WHERE queue = 'rl_a';
SELECT pg_temp.fill('rl_a', 10);
SELECT count(*) FROM queue.claim('rl_a', 2);
SELECT count(*) FROM queue.claim('rl_a', 5);
SELECT count(*) FROM queue.claim('rl_a');
SELECT ready, running FROM queue.stats WHERE queue = 'rl_a';

-- A claim's tokens stay spent when its transaction rolls back (its
-- consumer may have called the limited service); the jobs are ready again.
SELECT queue.create('rl_b', rate_limit => 2, rate_period => '1 hour');
SELECT pg_temp.fill('rl_b', 10);
BEGIN;
SELECT payload->>'n' AS n FROM queue.claim('rl_b', 2);
ROLLBACK;
SELECT count(*) FROM queue.claim('rl_b');
SELECT ready FROM queue.stats WHERE queue = 'rl_b';

-- Tokens a claim could not use (too few jobs) go back at once.
SELECT queue.create('rl_c', rate_limit => 5, rate_period => '1 hour');
SELECT pg_temp.fill('rl_c', 2);
SELECT count(*) FROM queue.claim('rl_c', 10);
SELECT pg_temp.fill('rl_c', 10);
SELECT count(*) FROM queue.claim('rl_c', 10);
SELECT count(*) FROM queue.claim('rl_c', 10);

-- A job that comes back takes a new token when claimed again: release,
-- and fail with a retry.
SELECT queue.create('rl_d', rate_limit => 3, rate_period => '1 hour', backoff_base => '0');
SELECT pg_temp.fill('rl_d', 1);
SELECT queue.release(id) FROM queue.claim('rl_d');
SELECT queue.fail(id, 'try again') FROM queue.claim('rl_d');
SELECT payload->>'n' AS n, attempt FROM queue.claim('rl_d');
SELECT count(*) FROM queue.claim('rl_d');
SELECT state, attempt FROM queue.jobs WHERE queue = 'rl_d';

-- With max_running: slots and tokens both bound a claim, and the tokens
-- of jobs the slots did not allow go back.
SELECT queue.create('rl_e', rate_limit => 5, rate_period => '1 hour', max_running => 2);
SELECT pg_temp.fill('rl_e', 10);
SELECT queue.complete(array_agg(id)) FROM queue.claim('rl_e', 5);
SELECT queue.complete(array_agg(id)) FROM queue.claim('rl_e', 5);
SELECT count(*) FROM queue.claim('rl_e', 5);
SELECT count(*) FROM queue.claim('rl_e', 5);

-- Priorities still decide which jobs the tokens go to.
SELECT queue.create('rl_f', rate_limit => 2, rate_period => '1 hour');
SELECT queue.enqueue('rl_f', '{"n": "low"}', priority => -1) > 0 AS enqueued;
SELECT queue.enqueue('rl_f', '{"n": "high"}', priority => 5) > 0 AS enqueued;
SELECT queue.enqueue('rl_f', '{"n": "mid"}') > 0 AS enqueued;
SELECT payload->>'n' AS n FROM queue.claim('rl_f', 3);

-- A paused queue's claims take no tokens.
SELECT queue.create('rl_g', rate_limit => 2, rate_period => '1 hour');
SELECT pg_temp.fill('rl_g', 5);
SELECT queue.pause('rl_g');
SELECT count(*) FROM queue.claim('rl_g', 2);
SELECT queue.resume('rl_g');
SELECT count(*) FROM queue.claim('rl_g', 5);

-- Claims inside a transaction block (jobs held until commit) count too.
SELECT queue.create('rl_h', rate_limit => 3, rate_period => '1 hour');
SELECT pg_temp.fill('rl_h', 10);
BEGIN;
SELECT count(*) FROM queue.claim('rl_h', 2);
SELECT queue.complete(id) FROM queue.claim('rl_h');
SELECT count(*) FROM queue.claim('rl_h');
COMMIT;

-- alter: NULL leaves the limit as it is, a lower limit caps the bucket,
-- 0 removes it; the period can change alone.
SELECT queue.create('rl_i', rate_limit => 10, rate_period => '1 hour');
SELECT pg_temp.fill('rl_i', 20);
SELECT count(*) FROM queue.claim('rl_i', 2);
SELECT queue.alter('rl_i', max_attempts => 7);
SELECT rate_limit, rate_period, max_attempts FROM queue.queues WHERE queue = 'rl_i';
SELECT queue.alter('rl_i', rate_limit => 4);
SELECT count(*) FROM queue.claim('rl_i', 10);
SELECT queue.alter('rl_i', rate_period => '1 day');
SELECT rate_limit, rate_period FROM queue.queues WHERE queue = 'rl_i';
SELECT queue.alter('rl_i', rate_limit => 0);
SELECT rate_limit, rate_period FROM queue.queues WHERE queue = 'rl_i';
SELECT count(*) FROM queue.claim('rl_i', 100);

-- claim(wait =>) on an empty bucket sleeps until the next token (one per
-- 300 ms here), not to its deadline, and not less.
SELECT queue.create('rl_w', rate_limit => 1, rate_period => '300 milliseconds');
SELECT pg_temp.fill('rl_w', 3);
SELECT count(*) FROM queue.claim('rl_w');
SELECT clock_timestamp() AS t0 \gset
SELECT count(*) FROM queue.claim('rl_w', wait => '5 s');
SELECT clock_timestamp() - :'t0' >= interval '250 ms' AS waited_for_the_token,
       clock_timestamp() - :'t0' < interval '4 s' AS not_to_the_deadline;

-- Bad options: an error with a hint, and nothing made or changed.
SELECT queue.create('rl_bad', rate_limit => 0);
SELECT queue.create('rl_bad', rate_limit => -1);
SELECT queue.create('rl_bad', rate_limit => 1000001);
SELECT queue.create('rl_bad', rate_limit => 5, rate_period => '0');
SELECT queue.create('rl_bad', rate_limit => 5, rate_period => '-1 s');
SELECT queue.create('rl_bad', rate_limit => 5, rate_period => '2 days');
SELECT queue.create('rl_bad', rate_limit => 5, rate_period => NULL);
SELECT count(*) FROM queue.queues WHERE queue = 'rl_bad';
SELECT queue.alter('rl_a', rate_limit => -5);
SELECT queue.alter('rl_a', rate_period => '0.5 ms');
SELECT queue.alter('rl_nope', rate_limit => 5);
SELECT rate_limit, rate_period FROM queue.queues WHERE queue = 'rl_a';
-- the table holds to the same rules for an owner who updates it directly
-- (terse: the failing row shows times)
\set VERBOSITY terse
UPDATE queue.queue_config SET rate_limit = 0 WHERE name = 'rl_a';
UPDATE queue.queue_config SET rate_period = '3 days' WHERE name = 'rl_a';
\set VERBOSITY default
