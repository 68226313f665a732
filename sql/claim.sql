--
-- claim.sql: queue.claim.
--
-- Queues of this file are named clm_*.  Ids are kept in psql variables and
-- only compared; times are compared with a tolerance.
--
\set SHOW_CONTEXT never

--
-- claiming from an empty queue returns no rows; the columns of queue.claimed
--
SELECT queue.create('clm_empty');
SELECT * FROM queue.claim('clm_empty');
SELECT * FROM queue.claim('clm_empty', 100);

--
-- order: highest priority first, then first in
--
SELECT queue.create('clm_order');
SELECT queue.enqueue('clm_order', '{"n": "a", "p": 0}') AS a \gset
SELECT queue.enqueue('clm_order', '{"n": "b", "p": 0}') AS b \gset
SELECT queue.enqueue('clm_order', '{"n": "c", "p": 5}', priority => 5) AS c \gset
SELECT queue.enqueue('clm_order', '{"n": "d", "p": -1}', priority => -1) AS d \gset
SELECT queue.enqueue('clm_order', '{"n": "e", "p": 5}', priority => 5) AS e \gset
SELECT queue.enqueue('clm_order', '{"n": "f", "p": 0}') AS f \gset
SELECT queue.enqueue('clm_order', '{"n": "g", "p": 10}', priority => 10) AS g \gset
-- one at a time
SELECT payload->>'n' AS job, attempt, id = :g AS is_g FROM queue.claim('clm_order');
SELECT payload->>'n' AS job, attempt, id = :c AS is_c FROM queue.claim('clm_order');
SELECT payload->>'n' AS job, attempt, id = :e AS is_e FROM queue.claim('clm_order');
SELECT payload->>'n' AS job, attempt, id = :a AS is_a FROM queue.claim('clm_order');
-- a new job of a higher priority goes first, one of the same priority last
SELECT queue.enqueue('clm_order', '{"n": "h", "p": 0}') AS h \gset
SELECT queue.enqueue('clm_order', '{"n": "i", "p": 1}', priority => 1) AS i \gset
SELECT payload->>'n' AS job FROM queue.claim('clm_order');
SELECT payload->>'n' AS job FROM queue.claim('clm_order');
SELECT payload->>'n' AS job FROM queue.claim('clm_order');
SELECT payload->>'n' AS job FROM queue.claim('clm_order');
SELECT payload->>'n' AS job FROM queue.claim('clm_order');
-- nothing left
SELECT count(*) FROM queue.claim('clm_order');
SELECT state, count(*) FROM queue.jobs WHERE queue = 'clm_order' GROUP BY state;

-- the same order in one claim of many
SELECT queue.create('clm_batch');
SELECT count(*) FROM queue.enqueue_batch('clm_batch', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[]);
SELECT count(*) FROM queue.enqueue_batch('clm_batch', ARRAY['{"n": 4}', '{"n": 5}']::jsonb[], priority => 2);
SELECT count(*) FROM queue.enqueue_batch('clm_batch', ARRAY['{"n": 6}', '{"n": 7}']::jsonb[], priority => -2);
SELECT count(*) FROM queue.enqueue_batch('clm_batch', ARRAY['{"n": 8}', '{"n": 9}']::jsonb[], priority => 2);

--
-- max_jobs
--
SELECT payload, attempt FROM queue.claim('clm_batch', 3);
SELECT payload, attempt FROM queue.claim('clm_batch', max_jobs => 1);
SELECT payload, attempt FROM queue.claim('clm_batch', 4);
-- more than there are: what there is
SELECT payload, attempt FROM queue.claim('clm_batch', 10000);
SELECT count(*) FROM queue.claim('clm_batch', 10000);
SELECT state, count(*) FROM queue.jobs WHERE queue = 'clm_batch' GROUP BY state;

--
-- what a claim returns and records; the lease
--
SELECT queue.create('clm_lease', lease => '2 minutes');
SELECT queue.enqueue('clm_lease', '{"n": 1}', group_key => 'grp') AS l1 \gset
SELECT queue.enqueue('clm_lease', '{"n": 2}') AS l2 \gset
SELECT queue.enqueue('clm_lease', '{"n": 3}') AS l3 \gset
-- the queue's lease
SELECT id = :l1 AS is_l1, payload, attempt, group_key,
       enqueued_at <= now() AS enqueued_at_ok,
       lease_until - now() BETWEEN interval '2 minutes' AND interval '2 minutes 5 seconds' AS lease_ok
  FROM queue.claim('clm_lease');
-- the job is running, leased for exactly the lease from its claim
SELECT state, attempt, claimed_at >= enqueued_at AS claimed_at_ok,
       lease_until - claimed_at = interval '2 minutes' AS lease_exact
  FROM queue.jobs WHERE id = :l1;
-- a lease override
SELECT id = :l2 AS is_l2,
       lease_until - now() BETWEEN interval '10 minutes' AND interval '10 minutes 5 seconds' AS lease_10min
  FROM queue.claim('clm_lease', lease => '10 minutes');
SELECT lease_until - claimed_at = interval '10 minutes' AS lease_exact
  FROM queue.jobs WHERE id = :l2;
-- a short one
SELECT id = :l3 AS is_l3, lease_until - now() < interval '10 seconds' AS lease_short
  FROM queue.claim('clm_lease', 1, '5 seconds');
SELECT lease_until - claimed_at = interval '5 seconds' AS lease_exact
  FROM queue.jobs WHERE id = :l3;
-- NULL lease means the queue's lease
SELECT queue.enqueue('clm_lease', '{"n": 4}') AS l4 \gset
SELECT payload FROM queue.claim('clm_lease', 1, NULL);
SELECT lease_until - claimed_at = interval '2 minutes' AS queue_lease
  FROM queue.jobs WHERE id = :l4;

--
-- attempt goes up by one with each claim
--
SELECT queue.create('clm_attempt', backoff_base => '0', max_attempts => 3);
SELECT queue.enqueue('clm_attempt', '{}') AS at1 \gset
SELECT attempt FROM queue.claim('clm_attempt');
SELECT queue.fail(:at1, 'one');
SELECT attempt FROM queue.claim('clm_attempt');
SELECT queue.fail(:at1, 'two');
SELECT attempt FROM queue.claim('clm_attempt');
SELECT state, attempt, max_attempts FROM queue.jobs WHERE id = :at1;
SELECT queue.fail(:at1, 'three');
-- a dead job is not claimable
SELECT count(*) FROM queue.claim('clm_attempt');
SELECT state, attempt FROM queue.jobs WHERE id = :at1;

--
-- scheduled jobs are claimable only when due
--
SELECT queue.create('clm_sched');
SELECT queue.enqueue('clm_sched', '{"n": "later"}', run_at => now() + interval '1 hour') AS s1 \gset
SELECT queue.enqueue('clm_sched', '{"n": "delayed"}', delay => '1 day') AS s2 \gset
SELECT count(*) FROM queue.claim('clm_sched', 10);
SELECT payload->>'n' AS job, state FROM queue.jobs WHERE queue = 'clm_sched' ORDER BY id;
-- rescheduled to now: claimable
SELECT queue.reschedule(:s1, now());
SELECT payload->>'n' AS job, attempt FROM queue.claim('clm_sched', 10);
SELECT count(*) FROM queue.claim('clm_sched', 10);
-- run_at slightly in the past when enqueued: claimable at once
SELECT queue.enqueue('clm_sched', '{"n": "just past"}', run_at => clock_timestamp() - interval '1 millisecond') AS s3 \gset
SELECT payload->>'n' AS job FROM queue.claim('clm_sched');
-- a job that comes due while it waits: claimable once its time has passed
SELECT queue.enqueue('clm_sched', '{"n": "soon"}', delay => '200 milliseconds') AS s4 \gset
SELECT count(*) FROM queue.claim('clm_sched');
SELECT pg_sleep(0.3);
SELECT payload->>'n' AS job, attempt FROM queue.claim('clm_sched');
SELECT payload->>'n' AS job, state FROM queue.jobs WHERE queue = 'clm_sched' ORDER BY id;

--
-- a claim that rolls back leaves the job claimable, with its attempt
--
SELECT queue.create('clm_rollback');
SELECT queue.enqueue('clm_rollback', '{"n": 1}') AS r1 \gset
SELECT queue.enqueue('clm_rollback', '{"n": 2}') AS r2 \gset
BEGIN;
SELECT payload, attempt FROM queue.claim('clm_rollback');
ROLLBACK;
SELECT state, attempt, claimed_at, lease_until FROM queue.jobs WHERE id = :r1;
SELECT payload, attempt FROM queue.claim('clm_rollback');
-- the same with a savepoint
BEGIN;
SAVEPOINT sp;
SELECT payload, attempt FROM queue.claim('clm_rollback');
ROLLBACK TO SAVEPOINT sp;
SELECT payload, attempt FROM queue.claim('clm_rollback');
COMMIT;
SELECT payload, state, attempt FROM queue.jobs WHERE queue = 'clm_rollback' ORDER BY id;
-- a claim that fails (bad argument) inside a transaction takes nothing
SELECT queue.enqueue('clm_rollback', '{"n": 3}') AS r3 \gset
BEGIN;
SELECT payload FROM queue.claim('clm_rollback', 0);
ROLLBACK;
SELECT payload, attempt FROM queue.claim('clm_rollback');

--
-- transactional mode: claim, work and complete in one transaction
--
SELECT queue.create('clm_tx');
CREATE TABLE clm_side (payload jsonb);
SELECT queue.enqueue('clm_tx', '{"n": 1}') AS t1 \gset
SELECT queue.enqueue('clm_tx', '{"n": 2}') AS t2 \gset
BEGIN;
SELECT id AS tx_id, payload AS tx_payload FROM queue.claim('clm_tx') \gset
INSERT INTO clm_side VALUES (:'tx_payload');
SELECT queue.complete(:tx_id);
COMMIT;
SELECT :tx_id = :t1 AS was_t1;
SELECT payload FROM clm_side;
SELECT state, payload, attempt FROM queue.archive WHERE queue = 'clm_tx';
SELECT count(*) AS left_in_jobs FROM queue.jobs WHERE id = :t1;
-- the same rolled back: the job is ready again, unclaimed, and not archived
BEGIN;
SELECT id AS tx_id, payload AS tx_payload FROM queue.claim('clm_tx') \gset
INSERT INTO clm_side VALUES (:'tx_payload');
SELECT queue.complete(:tx_id);
ROLLBACK;
SELECT :tx_id = :t2 AS was_t2;
SELECT count(*) AS side_rows FROM clm_side;
SELECT state, attempt FROM queue.jobs WHERE id = :t2;
SELECT count(*) AS archived FROM queue.archive WHERE id = :t2;
SELECT payload, attempt FROM queue.claim('clm_tx');
DROP TABLE clm_side;

--
-- A due scheduled job is claimed in priority order with the ready ones.
-- (c comes due while a and b wait; c has the higher priority.)
--
SELECT queue.create('clm_due_prio');
SELECT queue.enqueue('clm_due_prio', '{"n": "a"}') AS dp_a \gset
SELECT queue.enqueue('clm_due_prio', '{"n": "b"}') AS dp_b \gset
SELECT payload->>'n' AS job FROM queue.claim('clm_due_prio');
SELECT queue.enqueue('clm_due_prio', '{"n": "c"}', priority => 5, delay => '100 milliseconds') AS dp_c \gset
SELECT pg_sleep(0.2);
SELECT payload->>'n' AS job FROM queue.claim('clm_due_prio');
SELECT payload->>'n' AS job FROM queue.claim('clm_due_prio');

--
-- A claim sees the jobs its own transaction made ready, whatever their
-- priority.
--
SELECT queue.create('clm_own_tx');
SELECT queue.enqueue('clm_own_tx', '{"n": "a"}') AS ot_a \gset
SELECT queue.enqueue('clm_own_tx', '{"n": "b"}') AS ot_b \gset
SELECT payload->>'n' AS job FROM queue.claim('clm_own_tx');
BEGIN;
SELECT queue.enqueue('clm_own_tx', '{"n": "urgent"}', priority => 5) AS ot_u \gset
SELECT payload->>'n' AS job FROM queue.claim('clm_own_tx');
COMMIT;
SELECT payload->>'n' AS job FROM queue.claim('clm_own_tx');

--
-- group_key: jobs with the same key run one at a time, in id order.
--
SELECT queue.create('clm_group');
SELECT queue.enqueue('clm_group', '{"n": 1}', group_key => 'g') AS g1 \gset
SELECT queue.enqueue('clm_group', '{"n": 2}', group_key => 'g') AS g2 \gset
SELECT queue.enqueue('clm_group', '{"n": 3}', group_key => 'h') AS g3 \gset
SELECT queue.enqueue('clm_group', '{"n": 4}') AS g4 \gset
-- one job of group g at a time: 1, 3 and 4, not 2
SELECT payload, group_key FROM queue.claim('clm_group', 10);
SELECT count(*) FROM queue.claim('clm_group', 10);
-- when 1 is done, 2 may run
SELECT queue.complete(:g1);
SELECT payload, group_key FROM queue.claim('clm_group', 10);

--
-- How a claim writes, seen by a trigger on the queue's table: on its own
-- (autocommit) it updates the jobs to running in place; inside a
-- transaction it deletes them, and writes back those still held at commit;
-- a job completed before commit is never written as running.  The job's
-- columns come out the same either way.
--
SELECT queue.create('clm_ways');
CREATE TABLE clm_ways_seen (n serial, op text, state text, attempt int, owner boolean);
CREATE FUNCTION clm_ways_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO public.clm_ways_seen (op, state, attempt, owner)
        VALUES (TG_OP, OLD.state, OLD.attempt, OLD.owner_pid IS NOT NULL);
        RETURN OLD;
    END IF;
    INSERT INTO public.clm_ways_seen (op, state, attempt, owner)
    VALUES (TG_OP, NEW.state, NEW.attempt, NEW.owner_pid = pg_catalog.pg_backend_pid());
    RETURN NEW;
END $$;
CREATE TRIGGER clm_ways_seen AFTER INSERT OR UPDATE OR DELETE ON queue.q_clm_ways
    FOR EACH ROW EXECUTE FUNCTION clm_ways_trigger();
SELECT queue.enqueue('clm_ways', '{"n": 1}') AS w1 \gset
SELECT queue.enqueue('clm_ways', '{"n": 2}') AS w2 \gset
SELECT queue.enqueue('clm_ways', '{"n": 3}') AS w3 \gset
TRUNCATE clm_ways_seen;
-- autocommit: one UPDATE
SELECT id = :w1 AS first, attempt FROM queue.claim('clm_ways');
SELECT op, state, attempt, owner FROM clm_ways_seen ORDER BY n;
TRUNCATE clm_ways_seen;
-- in a transaction, held at commit: DELETE, then INSERT as running
BEGIN;
SELECT id = :w2 AS second, attempt FROM queue.claim('clm_ways');
COMMIT;
SELECT op, state, attempt, owner FROM clm_ways_seen ORDER BY n;
TRUNCATE clm_ways_seen;
-- in a transaction, completed before commit: only the DELETE
BEGIN;
SELECT queue.complete(id) FROM queue.claim('clm_ways');
COMMIT;
SELECT op, state, attempt, owner FROM clm_ways_seen ORDER BY n;
-- both running jobs look alike
SELECT id = :w1 AS first, state, attempt, lease_until > claimed_at AS leased,
       owner_pid = pg_backend_pid() AS mine
FROM queue.q_clm_ways ORDER BY id;
SELECT queue.complete(ARRAY[:w1, :w2]::bigint[]);
SELECT id IN (:w1, :w2, :w3) AS ours, state FROM queue.archive WHERE queue = 'clm_ways' ORDER BY id;

--
-- Without the trigger a claim takes its jobs without the executor
-- (src/take.c); the rows come out as they did through it above.
--
DROP TRIGGER clm_ways_seen ON queue.q_clm_ways;
SELECT queue.enqueue('clm_ways', '{"n": 4}') AS w4 \gset
SELECT queue.enqueue('clm_ways', '{"n": 5}') AS w5 \gset
SELECT queue.enqueue('clm_ways', '{"n": 6}', priority => 1) AS w6 \gset
-- autocommit: in place; the higher priority first
SELECT id = :w6 AS sixth, attempt, lease_until > now() AS leased FROM queue.claim('clm_ways');
BEGIN;
SELECT id = :w4 AS fourth, attempt, lease_until > now() AS leased FROM queue.claim('clm_ways');
COMMIT;
-- autocommit, more than one job asked for: one lease for the batch, and
-- the rows stay as they are (src/lease.c)
SELECT id = :w5 AS fifth, attempt FROM queue.claim('clm_ways', 5);
SELECT payload->>'n' AS n, state, attempt, lease_until > claimed_at AS leased,
       owner_pid = pg_backend_pid() AS mine, history IS NULL AS no_history
FROM queue.q_clm_ways ORDER BY id;
SELECT ids = ARRAY[:w5]::bigint[] AS fifth, lease_until > claimed_at AS leased,
       owner_pid = pg_backend_pid() AS mine
FROM queue.l_clm_ways;
SELECT payload->>'n' AS n, state, attempt, lease_until > claimed_at AS leased
FROM queue.jobs WHERE queue = 'clm_ways' ORDER BY id;
SELECT queue.complete(ARRAY[:w4, :w5, :w6]::bigint[]);
-- the lease went with its last job
SELECT count(*) FROM queue.l_clm_ways;
-- a ready index changed by hand: claims go through the executor
DROP INDEX queue."q_clm_ways$ready";
CREATE INDEX "q_clm_ways$ready" ON queue.q_clm_ways (rank) WHERE state = 'ready';
SELECT count(*) FROM queue.enqueue_batch('clm_ways', ARRAY['{"n": 7}', '{"n": 8}', '{"n": 9}']::jsonb[]);
SELECT payload->>'n' AS n, attempt FROM queue.claim('clm_ways');
BEGIN;
SELECT payload->>'n' AS n, attempt FROM queue.claim('clm_ways', 2);
COMMIT;
SELECT payload->>'n' AS n, state FROM queue.q_clm_ways ORDER BY id;
SELECT queue.drop('clm_ways');

--
-- A job claimed in this transaction still holds its dedup_key, though it
-- has no row until the commit writes it back: enqueueing the key returns
-- its id, and the commit succeeds.
--
SELECT queue.create('clm_dedup');
SELECT queue.enqueue('clm_dedup', '{"n": 1}', dedup_key => 'k') AS dk \gset
BEGIN;
SELECT id = :dk AS claimed FROM queue.claim('clm_dedup');
SELECT queue.enqueue('clm_dedup', '{"n": 2}', dedup_key => 'k') = :dk AS same_id;
COMMIT;
SELECT payload->>'n' AS n, state FROM queue.q_clm_dedup ORDER BY id;
-- once the held job is completed, the key is free again
BEGIN;
SELECT queue.release(:dk);
SELECT queue.complete(id) FROM queue.claim('clm_dedup');
SELECT queue.enqueue('clm_dedup', '{"n": 3}', dedup_key => 'k') <> :dk AS new_id;
COMMIT;
SELECT payload->>'n' AS n, state FROM queue.q_clm_dedup ORDER BY id;
SELECT queue.drop('clm_dedup');
