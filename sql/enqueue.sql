--
-- enqueue.sql: queue.enqueue and queue.enqueue_batch.
--
-- Queues of this file are named enq_*.  Ids are kept in psql variables and
-- only compared; within one queue, id / 1000000 is the queue's own
-- sequence, which starts at 1.
--
\set SHOW_CONTEXT never

SELECT queue.create('enq_basic');
SELECT queue.create('enq_other');

--
-- single enqueue: ids increase, and carry the queue
--
-- an untyped literal resolves to the one enqueue
SELECT queue.enqueue('enq_basic', '{"to":"a@b.c"}') AS id1 \gset
SELECT queue.enqueue('enq_basic', '{"to":"d@e.f"}'::jsonb) AS id2 \gset
SELECT queue.enqueue('enq_basic', jsonb_build_object('to', 'g@h.i')) AS id3 \gset
SELECT queue.enqueue(queue => 'enq_basic', payload => '{"to":"j@k.l"}') AS id4 \gset
SELECT :id1 < :id2 AND :id2 < :id3 AND :id3 < :id4 AS increasing,
       :id1 / 1000000 AS s1, :id2 / 1000000 AS s2, :id3 / 1000000 AS s3, :id4 / 1000000 AS s4;
SELECT :id1 % 1000000 = :id4 % 1000000 AS same_queue_number;
SELECT queue.enqueue('enq_other', '{}') AS other1 \gset
SELECT :other1 % 1000000 <> :id1 % 1000000 AS other_queue_number, :other1 / 1000000 AS other_seq;

-- what a new job looks like
SELECT queue, id = :id1 AS is_id1, state, payload, priority, attempt, max_attempts,
       group_key, dedup_key, run_at >= enqueued_at AS run_at_ok,
       enqueued_at <= now() AS enqueued_at_ok, claimed_at, lease_until, last_error
  FROM queue.jobs WHERE queue = 'enq_basic' ORDER BY id;

-- payloads are kept as given: nested values, unicode, empty object
SELECT queue.enqueue('enq_basic', '{"a": {"b": [1, 2, {"c": null}]}, "s": "ünïcödé", "n": 1.50}') AS nested \gset
SELECT queue.enqueue('enq_basic', '{}') AS empty \gset
SELECT id = :nested AS is_nested, payload FROM queue.jobs WHERE id IN (:nested, :empty) ORDER BY id;

--
-- run_at and delay
--
SELECT queue.create('enq_when');
SELECT now() + interval '1 hour' AS later, now() - interval '1 hour' AS earlier \gset
-- run_at in the future: scheduled, at exactly that time
SELECT queue.enqueue('enq_when', '{"n": "run_at later"}', run_at => :'later') AS w1 \gset
-- run_at in the past: ready, with the time given
SELECT queue.enqueue('enq_when', '{"n": "run_at earlier"}', run_at => :'earlier') AS w2 \gset
-- delay: scheduled, run_at = the time of the call + delay
SELECT queue.enqueue('enq_when', '{"n": "delay 2 hours"}', delay => '2 hours') AS w3 \gset
-- delay 0 and run_at NULL / delay NULL mean now
SELECT queue.enqueue('enq_when', '{"n": "delay 0"}', delay => '0') AS w4 \gset
SELECT queue.enqueue('enq_when', '{"n": "nulls"}', run_at => NULL, delay => NULL) AS w5 \gset
SELECT payload->>'n' AS job, state,
       CASE id WHEN :w1 THEN run_at = :'later'
               WHEN :w2 THEN run_at = :'earlier'
               WHEN :w3 THEN run_at - enqueued_at BETWEEN interval '2 hours' AND interval '2 hours 5 seconds'
               ELSE run_at - enqueued_at BETWEEN interval '0' AND interval '5 seconds' END AS run_at_ok
  FROM queue.jobs WHERE queue = 'enq_when' ORDER BY id;
-- only the due ones are claimable
SELECT payload->>'n' AS job FROM queue.claim('enq_when', 10);

--
-- priority, group_key, dedup_key are stored
--
SELECT queue.create('enq_attrs');
SELECT queue.enqueue('enq_attrs', '{"n": 1}', priority => 10) AS a1 \gset
SELECT queue.enqueue('enq_attrs', '{"n": 2}', priority => -5, group_key => 'customer-7') AS a2 \gset
SELECT queue.enqueue('enq_attrs', '{"n": 3}', group_key => 'customer-8', dedup_key => 'invoice-1') AS a3 \gset
SELECT queue.enqueue('enq_attrs', '{"n": 4}', priority => 2147483647, group_key => repeat('g', 512)) AS a4 \gset
SELECT payload, priority, group_key IS NOT DISTINCT FROM repeat('g', 512) AS long_group,
       CASE WHEN length(group_key) < 100 THEN group_key END AS group_key, dedup_key
  FROM queue.jobs WHERE queue = 'enq_attrs' ORDER BY id;
-- group_key comes back from claim
SELECT payload, group_key FROM queue.claim('enq_attrs', 10) WHERE length(group_key) < 100 OR group_key IS NULL;

--
-- dedup_key
--
SELECT queue.create('enq_dedup', max_attempts => 1);
SELECT queue.enqueue('enq_dedup', '{"v": 1}', dedup_key => 'order-42') AS d1 \gset
-- while the first is unfinished, the same key returns its id and adds nothing
SELECT queue.enqueue('enq_dedup', '{"v": 2}', dedup_key => 'order-42') AS d2 \gset
SELECT :d1 = :d2 AS same_id;
SELECT payload, dedup_key FROM queue.jobs WHERE queue = 'enq_dedup';
-- another key, or no key, adds a job
SELECT queue.enqueue('enq_dedup', '{"v": 3}', dedup_key => 'order-43') AS d3 \gset
SELECT queue.enqueue('enq_dedup', '{"v": 4}') AS d4 \gset
SELECT :d3 > :d1 AND :d4 > :d3 AS new_ids;
-- a scheduled job holds its key too
SELECT queue.enqueue('enq_dedup', '{"v": 5}', dedup_key => 'sched', delay => '1 hour') AS d5 \gset
SELECT queue.enqueue('enq_dedup', '{"v": 6}', dedup_key => 'sched') = :d5 AS same_id;
-- a running job holds its key
SELECT payload FROM queue.claim('enq_dedup');
SELECT queue.enqueue('enq_dedup', '{"v": 7}', dedup_key => 'order-42') = :d1 AS same_id_while_running;
-- once it completed, the key is free: a new job with a new id
SELECT queue.complete(:d1);
SELECT queue.enqueue('enq_dedup', '{"v": 8}', dedup_key => 'order-42') AS d8 \gset
SELECT :d8 > :d1 AS new_id;
SELECT payload FROM queue.jobs WHERE queue = 'enq_dedup' AND dedup_key = 'order-42';
-- a dead job does not hold its key (max_attempts is 1 here)
SELECT queue.cancel(:d4);
SELECT payload FROM queue.claim('enq_dedup');
SELECT queue.fail(:d3, 'gave up');
SELECT state FROM queue.jobs WHERE id = :d3;
SELECT queue.enqueue('enq_dedup', '{"v": 9}', dedup_key => 'order-43') AS d9 \gset
SELECT :d9 <> :d3 AS new_id;
-- nor does a cancelled one
SELECT queue.cancel(:d5);
SELECT queue.enqueue('enq_dedup', '{"v": 10}', dedup_key => 'sched') AS d10 \gset
SELECT :d10 <> :d5 AS new_id;
-- the same key in another queue is another key
SELECT queue.enqueue('enq_other', '{"v": 11}', dedup_key => 'order-42') <> :d8 AS other_queue;
-- a key enqueued in a transaction that rolled back holds nothing
BEGIN;
SELECT queue.enqueue('enq_dedup', '{"v": 12}', dedup_key => 'rolled') AS d12 \gset
SELECT queue.enqueue('enq_dedup', '{"v": 13}', dedup_key => 'rolled') = :d12 AS same_id_in_transaction;
ROLLBACK;
SELECT queue.enqueue('enq_dedup', '{"v": 14}', dedup_key => 'rolled') AS d14 \gset
SELECT payload FROM queue.jobs WHERE queue = 'enq_dedup' AND dedup_key = 'rolled';
SELECT payload, dedup_key, state FROM queue.jobs WHERE queue = 'enq_dedup' ORDER BY id;

--
-- enqueue_batch
--
SELECT queue.create('enq_batch');
-- ids in array order, increasing
SELECT array_agg(b.id ORDER BY b.n) AS batch_ids
  FROM queue.enqueue_batch('enq_batch', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 4}']::jsonb[])
       WITH ORDINALITY AS b(id, n) \gset
SELECT u.n, j.payload, j.state, j.priority, j.group_key, u.id / 1000000 AS seq
  FROM unnest(:'batch_ids'::bigint[]) WITH ORDINALITY AS u(id, n)
  JOIN queue.jobs j ON j.id = u.id
 ORDER BY u.n;
SELECT bool_and(a < b) AS increasing
  FROM (SELECT id AS a, lead(id) OVER (ORDER BY n) AS b
          FROM unnest(:'batch_ids'::bigint[]) WITH ORDINALITY AS u(id, n)) s
 WHERE b IS NOT NULL;
-- a single enqueue afterwards gets a larger id
SELECT queue.enqueue('enq_batch', '{"n": 5}') > ALL (:'batch_ids'::bigint[]) AS after_batch;
-- one element, and the ARRAY[...::jsonb] spelling
SELECT count(*) FROM queue.enqueue_batch('enq_batch', ARRAY['{"n": 6}'::jsonb]);
-- an empty array adds nothing and returns no rows
SELECT count(*) FROM queue.enqueue_batch('enq_batch', ARRAY[]::jsonb[]);
SELECT count(*) FROM queue.enqueue_batch('enq_batch', '{}');
SELECT count(*) AS jobs FROM queue.jobs WHERE queue = 'enq_batch';
-- the options apply to every job of the batch; with a group_key the first
-- job is the group's head (here scheduled) and the others wait behind it
SELECT now() + interval '1 day' AS tomorrow \gset
SELECT count(*) FROM queue.enqueue_batch('enq_batch', ARRAY['{"n": 7}', '{"n": 8}']::jsonb[],
                                         run_at => :'tomorrow', priority => 3, group_key => 'batch-g');
SELECT count(*) FROM queue.enqueue_batch('enq_batch', ARRAY['{"n": 9}', '{"n": 10}']::jsonb[],
                                         delay => '1 hour', priority => -1);
SELECT payload, state, priority, group_key,
       CASE WHEN priority = 3 THEN run_at = :'tomorrow'
            WHEN priority = -1 THEN run_at - enqueued_at BETWEEN interval '1 hour' AND interval '1 hour 5 seconds'
            ELSE run_at <= now() END AS run_at_ok
  FROM queue.jobs WHERE queue = 'enq_batch' ORDER BY id;
-- a batch is claimed in array order
SELECT payload FROM queue.claim('enq_batch', 10);

--
-- enqueue is transactional
--
SELECT queue.create('enq_tx');
BEGIN;
SELECT queue.enqueue('enq_tx', '{"n": "rolled back"}') > 0 AS enqueued;
SELECT count(*) FROM queue.enqueue_batch('enq_tx', ARRAY['{"n": "batch rolled back"}']::jsonb[]);
-- visible inside the transaction
SELECT payload FROM queue.jobs WHERE queue = 'enq_tx' ORDER BY id;
ROLLBACK;
-- and gone after the rollback
SELECT count(*) AS jobs FROM queue.jobs WHERE queue = 'enq_tx';
SELECT count(*) AS claimed FROM queue.claim('enq_tx');
-- a savepoint rolled back takes its jobs with it
BEGIN;
SELECT queue.enqueue('enq_tx', '{"n": "A"}') > 0 AS enqueued;
SAVEPOINT s1;
SELECT queue.enqueue('enq_tx', '{"n": "B"}') > 0 AS enqueued;
ROLLBACK TO SAVEPOINT s1;
SELECT queue.enqueue('enq_tx', '{"n": "C"}') > 0 AS enqueued;
SAVEPOINT s2;
SELECT queue.enqueue('enq_tx', '{"n": "D"}') > 0 AS enqueued;
RELEASE SAVEPOINT s2;
COMMIT;
SELECT payload FROM queue.jobs WHERE queue = 'enq_tx' ORDER BY id;
-- the committed jobs are claimable, in order
SELECT payload FROM queue.claim('enq_tx', 10);
-- an error inside the transaction (after an enqueue) rolls the enqueue back too
BEGIN;
SELECT queue.enqueue('enq_tx', '{"n": "E"}') > 0 AS enqueued;
SELECT queue.enqueue('enq_tx', '[1, 2]');
COMMIT;
SELECT count(*) AS ready FROM queue.jobs WHERE queue = 'enq_tx' AND state = 'ready';

-- Enqueue inserts without the executor (src/insert.c).  An index a user
-- adds to a queue table gets its entries, and a table with a trigger is
-- left to the executor, so the trigger fires.
SELECT queue.create('enq_direct');
SELECT queue.enqueue('enq_direct', '{"companyId": 1}') IS NOT NULL AS first;
CREATE INDEX enq_direct_company ON queue.q_enq_direct ((payload->>'companyId'));
SELECT queue.enqueue('enq_direct', '{"companyId": 2}') IS NOT NULL AS after_index;
-- a batch goes in many rows per call (table_multi_insert), indexed too
SELECT count(*) AS batch FROM queue.enqueue_batch('enq_direct',
    (SELECT array_agg(jsonb_build_object('companyId', 100 + i, 'pad', repeat('x', i * 40))) FROM generate_series(1, 250) i));
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT payload FROM queue.q_enq_direct WHERE payload->>'companyId' = '2';
SELECT payload FROM queue.q_enq_direct WHERE payload->>'companyId' = '2';
SELECT payload->>'companyId' AS company, length(payload->>'pad') AS pad
FROM queue.q_enq_direct WHERE payload->>'companyId' IN ('101', '250', '350') ORDER BY 1;
SELECT count(*) AS ready_by_index FROM queue.q_enq_direct WHERE state = 'ready' AND priority = 0 AND rank > 0;
RESET enable_seqscan;
SELECT count(*) AS all_rows, count(DISTINCT id) AS ids, count(DISTINCT rank) AS ranks,
       bool_and(rank = id / 1000000) AS rank_is_seq
FROM queue.q_enq_direct;
-- (the batch's 1.2 MB goes in as many table_multi_insert calls: ids still
-- follow the array)
SELECT bool_and(c = prev + 1) AS batch_in_array_order
FROM (SELECT (payload->>'companyId')::int AS c, lag((payload->>'companyId')::int) OVER (ORDER BY id) AS prev
      FROM queue.q_enq_direct WHERE (payload->>'companyId')::int > 100) s
WHERE prev IS NOT NULL;
CREATE TABLE enq_seen (payload jsonb);
CREATE FUNCTION enq_seen_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.enq_seen VALUES (NEW.payload);  -- search_path is pinned
    RETURN NEW;
END $$;
CREATE TRIGGER enq_seen AFTER INSERT ON queue.q_enq_direct
    FOR EACH ROW EXECUTE FUNCTION enq_seen_trigger();
SELECT queue.enqueue('enq_direct', '{"companyId": 3}') IS NOT NULL AS with_trigger;
SELECT count(*) AS batch_with_trigger FROM queue.enqueue_batch('enq_direct', ARRAY['{"companyId": 31}', '{"companyId": 32}']::jsonb[]);
SELECT payload FROM enq_seen;
DROP TRIGGER enq_seen ON queue.q_enq_direct;
-- a BEFORE trigger that skips the row makes enqueue fail, not lose the job
CREATE FUNCTION enq_skip_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END $$;
CREATE TRIGGER enq_skip BEFORE INSERT ON queue.q_enq_direct
    FOR EACH ROW EXECUTE FUNCTION enq_skip_trigger();
SELECT queue.enqueue('enq_direct', '{"companyId": 9}');
SELECT queue.enqueue_batch('enq_direct', ARRAY['{"companyId": 9}']::jsonb[]);
DROP TRIGGER enq_skip ON queue.q_enq_direct;
DROP FUNCTION enq_skip_trigger();
SELECT queue.enqueue('enq_direct', '{"companyId": 4}') IS NOT NULL AS trigger_dropped;
SELECT count(*) AS seen FROM enq_seen;
SELECT payload->>'companyId' AS company, state FROM queue.jobs
WHERE queue = 'enq_direct' AND (payload->>'companyId')::int NOT BETWEEN 101 AND 350 ORDER BY id;
-- what the executor would enforce is not bypassed: a CHECK constraint and
-- a column added with a default make enqueue use the executor
ALTER TABLE queue.q_enq_direct ADD CONSTRAINT has_company CHECK (payload ? 'companyId');
\set VERBOSITY terse
SELECT queue.enqueue('enq_direct', '{"other": 1}');
SELECT queue.enqueue_batch('enq_direct', ARRAY['{"companyId": 5}', '{"other": 2}']::jsonb[]);
\set VERBOSITY default
ALTER TABLE queue.q_enq_direct DROP CONSTRAINT has_company;
ALTER TABLE queue.q_enq_direct ADD COLUMN source text NOT NULL DEFAULT 'app';
SELECT count(*) AS batch_with_default FROM queue.enqueue_batch('enq_direct', ARRAY['{"companyId": 6}', '{"companyId": 7}']::jsonb[]);
SELECT queue.enqueue('enq_direct', '{"companyId": 8}') IS NOT NULL AS single_with_default;
SELECT payload->>'companyId' AS company, source FROM queue.q_enq_direct WHERE (payload->>'companyId')::int BETWEEN 5 AND 8 ORDER BY id;
ALTER TABLE queue.q_enq_direct DROP COLUMN source;
SELECT queue.drop('enq_direct');
DROP TABLE enq_seen;
DROP FUNCTION enq_seen_trigger();
