--
-- complete.sql: queue.complete(id, attempt) and queue.complete(ids[]).
--
-- Queues of this file are named cmp_*.  Error messages name job ids, so
-- the calls that fail run through pg_temp.try, which prints the SQLSTATE,
-- message, detail and hint with the id shown as <id>.
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
-- complete: the job leaves queue.jobs and is archived as done
--
SELECT queue.create('cmp_basic');
SELECT queue.enqueue('cmp_basic', '{"n": 1}', priority => 3, group_key => 'g1', dedup_key => 'd1') AS c1 \gset
SELECT queue.enqueue('cmp_basic', '{"n": 2}') AS c2 \gset
SELECT id = :c1 AS is_c1, attempt FROM queue.claim('cmp_basic');
SELECT queue.complete(:c1);
SELECT count(*) AS in_jobs FROM queue.jobs WHERE id = :c1;
SELECT queue, id = :c1 AS is_c1, state, payload, priority, attempt, group_key, dedup_key,
       run_at <= claimed_at AS run_at_ok, enqueued_at <= claimed_at AS enqueued_at_ok,
       claimed_at <= finished_at AS claimed_at_ok, finished_at <= now() AS finished_at_ok,
       last_error
  FROM queue.archive WHERE queue = 'cmp_basic';
-- the other job is untouched
SELECT state, attempt FROM queue.jobs WHERE id = :c2;
-- the dedup_key of a completed job is free again
SELECT queue.enqueue('cmp_basic', '{"n": 3}', dedup_key => 'd1') <> :c1 AS new_job;

--
-- the fencing token
--
SELECT queue.create('cmp_token', backoff_base => '0');
SELECT queue.enqueue('cmp_token', '{"n": 1}') AS t1 \gset
-- the right token: true
SELECT attempt FROM queue.claim('cmp_token');
SELECT queue.complete(:t1, 1);
SELECT state, attempt FROM queue.archive WHERE id = :t1;
-- a stale token: false, and nothing changes.  The first consumer held
-- attempt 1; the job failed and was claimed again as attempt 2.
SELECT queue.enqueue('cmp_token', '{"n": 2}') AS t2 \gset
SELECT attempt FROM queue.claim('cmp_token');
SELECT queue.fail(:t2, 'consumer 1 lost it');
SELECT attempt FROM queue.claim('cmp_token');
SELECT queue.complete(:t2, 1);
SELECT queue.complete(:t2, attempt => 1);
SELECT state, attempt, last_error FROM queue.jobs WHERE id = :t2;
SELECT count(*) AS archived FROM queue.archive WHERE id = :t2;
-- the current holder's token works
SELECT queue.complete(:t2, 2);
SELECT state, attempt FROM queue.archive WHERE id = :t2;
-- a token for a job that finished, that is ready, or that does not exist: false, not an error
SELECT queue.complete(:t2, 2);
SELECT queue.enqueue('cmp_token', '{"n": 3}') AS t3 \gset
SELECT queue.complete(:t3, 0);
SELECT queue.complete(:t3, 1);
SELECT state, attempt FROM queue.jobs WHERE id = :t3;
SELECT queue.complete(:t3 + 1000000000, 1);
SELECT queue.complete(999999, 1);
SELECT queue.complete(-1, 1);

--
-- completing a job that is not running, without a token, is an error
--
SELECT queue.create('cmp_errors', max_attempts => 1);
SELECT queue.enqueue('cmp_errors', '{"n": "done"}') AS e_done \gset
SELECT queue.enqueue('cmp_errors', '{"n": "dead"}') AS e_dead \gset
SELECT count(*) FROM queue.claim('cmp_errors', 2);
SELECT queue.complete(:e_done);
SELECT queue.fail(:e_dead, 'fatal');
SELECT queue.enqueue('cmp_errors', '{"n": "ready"}') AS e_ready \gset
SELECT queue.enqueue('cmp_errors', '{"n": "scheduled"}', delay => '1 hour') AS e_sched \gset
CALL pg_temp.try('SELECT queue.complete($1)', :e_ready);
CALL pg_temp.try('SELECT queue.complete($1)', :e_sched);
CALL pg_temp.try('SELECT queue.complete($1)', :e_dead);
-- already completed
CALL pg_temp.try('SELECT queue.complete($1)', :e_done);
-- an id of this queue that was never handed out
CALL pg_temp.try('SELECT queue.complete($1)', :e_done + 1000000000);
-- an id no queue has
CALL pg_temp.try('SELECT queue.complete(999999)');
CALL pg_temp.try('SELECT queue.complete(0)');
-- nothing changed
SELECT payload->>'n' AS job, state FROM queue.jobs WHERE queue = 'cmp_errors' ORDER BY id;
SELECT payload->>'n' AS job, state FROM queue.archive WHERE queue = 'cmp_errors' ORDER BY id;

--
-- complete(ids bigint[]): how many were completed
--
SELECT queue.create('cmp_many');
SELECT queue.create('cmp_many2');
SELECT array_agg(id ORDER BY n) AS many
  FROM queue.enqueue_batch('cmp_many', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}', '{"n": 4}', '{"n": 5}']::jsonb[])
       WITH ORDINALITY AS b(id, n) \gset
SELECT queue.enqueue('cmp_many2', '{"n": "other queue"}') AS other \gset
SELECT count(*) FROM queue.claim('cmp_many', 3);
SELECT count(*) FROM queue.claim('cmp_many2');
-- running jobs 1 and 2 are completed; 4 (ready) and unknown ids are left alone
SELECT queue.complete(ARRAY[(:'many'::bigint[])[1], (:'many'::bigint[])[2], (:'many'::bigint[])[4], 999999]);
SELECT payload, state FROM queue.jobs WHERE queue = 'cmp_many' ORDER BY id;
SELECT payload, state FROM queue.archive WHERE queue = 'cmp_many' ORDER BY id;
-- ids of two queues, and the same id twice
SELECT queue.complete(ARRAY[:other, (:'many'::bigint[])[3], :other]);
SELECT queue, payload, state FROM queue.archive WHERE queue LIKE 'cmp\_many%' ORDER BY queue, id;
-- an empty array, and ids that are all finished already
SELECT queue.complete(ARRAY[]::bigint[]);
SELECT queue.complete(:'many'::bigint[]);
SELECT payload, state FROM queue.jobs WHERE queue = 'cmp_many' ORDER BY id;
-- a NULL in the array is an error, and completes nothing
SELECT count(*) FROM queue.claim('cmp_many', 2);
SELECT queue.complete(ARRAY[(:'many'::bigint[])[4], NULL]);
SELECT queue.complete(NULL::bigint[]);
SELECT payload, state FROM queue.jobs WHERE queue = 'cmp_many' ORDER BY id;
SELECT queue.complete(ARRAY[(:'many'::bigint[])[4], (:'many'::bigint[])[5]]);
SELECT count(*) AS left_in_jobs FROM queue.jobs WHERE queue = 'cmp_many';

--
-- retention 0: a completed job leaves no archive row
--
SELECT queue.create('cmp_noarchive', retention => '0');
SELECT queue.enqueue('cmp_noarchive', '{"n": 1}') AS n1 \gset
SELECT queue.enqueue('cmp_noarchive', '{"n": 2}') AS n2 \gset
SELECT queue.enqueue('cmp_noarchive', '{"n": 3}') AS n3 \gset
SELECT count(*) FROM queue.claim('cmp_noarchive', 3);
SELECT queue.complete(:n1);
SELECT queue.complete(:n2, 1);
SELECT queue.complete(ARRAY[:n3]);
SELECT count(*) AS in_jobs FROM queue.jobs WHERE queue = 'cmp_noarchive';
SELECT count(*) AS archived FROM queue.archive WHERE queue = 'cmp_noarchive';
-- and it is finished: completing it again is an error
CALL pg_temp.try('SELECT queue.complete($1)', :n1);
CALL pg_temp.try('SELECT queue.history($1)', :n1);

--
-- complete is transactional
--
SELECT queue.create('cmp_tx');
SELECT queue.enqueue('cmp_tx', '{"n": 1}') AS x1 \gset
SELECT count(*) FROM queue.claim('cmp_tx');
BEGIN;
SELECT queue.complete(:x1);
ROLLBACK;
SELECT state, attempt FROM queue.jobs WHERE id = :x1;
SELECT count(*) AS archived FROM queue.archive WHERE id = :x1;
-- completing twice in one transaction: the second sees it finished
BEGIN;
SELECT queue.complete(:x1);
SELECT queue.complete(:x1, 1);
COMMIT;
SELECT state FROM queue.archive WHERE id = :x1;

--
-- The archive row of a completed job has every column of the job, whether
-- the job was completed in its claim's transaction (held) or in another
-- (leased), one at a time or in a batch; indexes a user adds to the
-- archive get their entries; a trigger on the archive sees every row.
--
SELECT queue.create('cmp_arch', max_attempts => 5);
SELECT id AS a1 FROM queue.enqueue('cmp_arch', '{"k": "one"}', priority => 3, dedup_key => 'd1') AS id \gset
SELECT id AS a2 FROM queue.enqueue('cmp_arch', '{"k": "two"}', group_key => 'g') AS id \gset
SELECT count(*) FROM queue.enqueue_batch('cmp_arch', (SELECT array_agg(jsonb_build_object('k', 'b' || i)) FROM generate_series(1, 300) i));
CREATE INDEX cmp_arch_k ON queue.a_cmp_arch ((payload->>'k'));
CREATE INDEX cmp_arch_b ON queue.a_cmp_arch (id) WHERE payload->>'k' LIKE 'b%';
-- a1 fails once first, so its archive row has an error and a history
SELECT id = :a1 AS a1 FROM queue.claim('cmp_arch');
SELECT queue.fail(:a1, 'first try failed', retry_in => '0');
-- leased: claimed alone, completed in a later transaction
SELECT id = :a1 AS a1, attempt FROM queue.claim('cmp_arch');
SELECT queue.complete(:a1);
-- held: claimed and completed in one transaction
BEGIN;
SELECT id = :a2 AS a2 FROM queue.claim('cmp_arch');
SELECT queue.complete(:a2);
COMMIT;
-- batches, leased and held
SELECT queue.complete(array_agg(id)) FROM queue.claim('cmp_arch', 150);
BEGIN;
SELECT queue.complete(array_agg(id)) FROM queue.claim('cmp_arch', 150);
COMMIT;
SELECT id = :a1 AS a1, state, attempt, priority, dedup_key, group_key, last_error,
       jsonb_array_length(history) AS history, payload,
       run_at <= claimed_at AND claimed_at <= finished_at AND enqueued_at <= run_at AS times
FROM queue.a_cmp_arch WHERE id IN (:a1, :a2) ORDER BY id;
SELECT count(*), count(DISTINCT id), bool_and(state = 'done') AS done,
       bool_and(claimed_at IS NOT NULL AND finished_at >= claimed_at) AS times
FROM queue.a_cmp_arch;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM queue.a_cmp_arch WHERE payload->>'k' = 'b17';
SELECT payload FROM queue.a_cmp_arch WHERE payload->>'k' IN ('b1', 'b17', 'b150', 'b151', 'b300', 'one', 'two') ORDER BY 1;
EXPLAIN (COSTS OFF) SELECT count(*) FROM queue.a_cmp_arch WHERE payload->>'k' LIKE 'b%' AND id > 0;
SELECT count(*) AS by_partial_index FROM queue.a_cmp_arch WHERE payload->>'k' LIKE 'b%' AND id > 0;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT count(*) AS by_seqscan FROM queue.a_cmp_arch WHERE payload->>'k' LIKE 'b%';
-- payloads too big to stay in the row (TOAST), incompressible, both ways
SELECT count(*) FROM queue.enqueue_batch('cmp_arch', (SELECT array_agg(jsonb_build_object('k', 'big' || i,
    'pad', (SELECT string_agg(md5(i::text || j::text), '') FROM generate_series(1, 400) j))) FROM generate_series(1, 4) i));
CREATE TEMP TABLE cmp_big AS SELECT payload->>'k' AS k, md5(payload::text) AS sum FROM queue.q_cmp_arch WHERE payload ? 'pad';
SELECT queue.complete(array_agg(id)) FROM queue.claim('cmp_arch', 2);
BEGIN;
SELECT queue.complete(array_agg(id)) FROM queue.claim('cmp_arch', 2);
COMMIT;
SELECT b.k, md5(a.payload::text) = b.sum AS same, length(a.payload->>'pad') AS pad
FROM cmp_big b JOIN queue.a_cmp_arch a ON a.payload->>'k' = b.k ORDER BY 1;
-- with a trigger on the archive, rows go through the executor
CREATE TABLE cmp_arch_seen (id bigint, state text);
CREATE FUNCTION cmp_arch_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.cmp_arch_seen VALUES (NEW.id, NEW.state);
    RETURN NEW;
END $$;
CREATE TRIGGER cmp_arch_seen AFTER INSERT ON queue.a_cmp_arch
    FOR EACH ROW EXECUTE FUNCTION cmp_arch_trigger();
SELECT count(*) FROM queue.enqueue_batch('cmp_arch', ARRAY['{"k": "t1"}', '{"k": "t2"}', '{"k": "t3"}']::jsonb[]);
SELECT queue.complete(id) FROM queue.claim('cmp_arch') ORDER BY 1;
BEGIN;
SELECT queue.complete(array_agg(id)) FROM queue.claim('cmp_arch', 2);
COMMIT;
SELECT count(*), count(DISTINCT id), bool_and(state = 'done') AS done FROM cmp_arch_seen;
SELECT count(*) AS archived FROM queue.a_cmp_arch;
-- Every queue's archive has queue._archive's columns, so none can be added
-- to one; a constraint can, and then the executor inserts and enforces it.
DROP TRIGGER cmp_arch_seen ON queue.a_cmp_arch;
ALTER TABLE queue.a_cmp_arch ADD COLUMN archived_by text;
ALTER TABLE queue.a_cmp_arch ADD CONSTRAINT cmp_arch_public CHECK (NOT payload ? 'secret');
SELECT count(*) FROM queue.enqueue_batch('cmp_arch', ARRAY['{"k": "d1"}', '{"k": "d2", "secret": 1}']::jsonb[]);
BEGIN;
SELECT queue.complete(id) FROM queue.claim('cmp_arch');
COMMIT;
BEGIN;
\set VERBOSITY terse
SELECT queue.complete(id) FROM queue.claim('cmp_arch');
\set VERBOSITY default
COMMIT;
-- d2 was not lost: the failed transaction's claim rolled back with it
SELECT payload->>'k' AS k, state FROM queue.jobs WHERE queue = 'cmp_arch';
SELECT payload->>'k' AS k, state FROM queue.a_cmp_arch WHERE payload->>'k' LIKE 'd%' ORDER BY 1;
-- Big values are compressed with lz4 where the server has it, and a value
-- compressed at enqueue reaches the archive as it is, not decompressed and
-- compressed again: with this hot table on pglz and its archive on lz4,
-- archived payloads are still pglz, whichever way the job was completed.
SELECT queue.create('cmp_z');
SELECT count(*) AS tables, bool_and(a.attcompression = CASE WHEN 'lz4' = ANY (s.enumvals) THEN 'l' ELSE '' END) AS lz4
FROM pg_attribute a, pg_settings s
WHERE s.name = 'default_toast_compression' AND a.attname IN ('payload', 'history', 'last_error')
  AND a.attrelid IN ('queue._job'::regclass, 'queue._archive'::regclass, 'queue.q_cmp_z'::regclass, 'queue."a_cmp_z$0"'::regclass);
SELECT relname, reloptions FROM pg_class WHERE relname LIKE 'a_cmp_z$%' AND relkind = 'r' ORDER BY 1;
ALTER TABLE queue.q_cmp_z ALTER payload SET COMPRESSION pglz;
-- 'inline' compresses to a few hundred bytes and stays in the row;
-- 'toasted' compresses but not enough to, and is stored out of line
SELECT count(*) FROM queue.enqueue_batch('cmp_z', ARRAY[
    jsonb_build_object('k', 'tx inline', 'pad', repeat('abc', 10000)),
    jsonb_build_object('k', 'tx toasted', 'pad', (SELECT string_agg(repeat(md5(i::text), 2), '') FROM generate_series(1, 2000) i)),
    jsonb_build_object('k', 'leased inline', 'pad', repeat('abd', 10000)),
    jsonb_build_object('k', 'leased toasted', 'pad', (SELECT string_agg(repeat(md5(i::text), 2), '') FROM generate_series(2001, 4000) i))]);
CREATE TEMP TABLE cmp_z_before AS
SELECT payload->>'k' AS k, md5(payload::text) AS sum, pg_column_compression(payload) AS method,
       pg_column_size(payload) < 4000 AS small, pg_column_size(payload) < octet_length(payload::text) AS compressed
FROM queue.q_cmp_z;
SELECT k, method, small, compressed FROM cmp_z_before ORDER BY k;
BEGIN;
SELECT count(queue.complete(id)) FROM queue.claim('cmp_z', 2);
COMMIT;
SELECT count(queue.complete(id)) FROM queue.claim('cmp_z', 2);
SELECT b.k, pg_column_compression(a.payload) AS method, md5(a.payload::text) = b.sum AS same
FROM cmp_z_before b JOIN queue.a_cmp_z a ON a.payload->>'k' = b.k ORDER BY 1;
SELECT queue.drop('cmp_z');

-- Jobs completed together are archived in batches of at most 64 KB of
-- values: six of ~64 KB each, claimed and completed in one transaction,
-- all reach the archive whole.
SELECT queue.create('cmp_big');
SELECT count(*) FROM queue.enqueue_batch('cmp_big', (SELECT array_agg(jsonb_build_object('n', n, 'pad',
    (SELECT string_agg(md5((n * 10000 + i)::text), '') FROM generate_series(1, 2000) i))) FROM generate_series(1, 6) n));
CREATE TEMP TABLE cmp_big_before AS SELECT id, md5(payload::text) AS sum FROM queue.q_cmp_big;
BEGIN;
SELECT queue.complete((SELECT array_agg(id) FROM queue.claim('cmp_big', 6))) AS completed;
COMMIT;
SELECT count(*) AS archived, bool_and(md5(a.payload::text) = b.sum) AS same, bool_and(a.state = 'done') AS done
FROM cmp_big_before b JOIN queue.a_cmp_big a USING (id);
SELECT queue.drop('cmp_big');
