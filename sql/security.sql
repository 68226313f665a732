--
-- security.sql: the extension's functions cannot be misled by the
-- caller's search_path, queue names cannot inject SQL, and a role without
-- privileges is refused cleanly.
--
-- Queues of this file are named sec_*.
--
\set SHOW_CONTEXT never

--
-- A schema full of traps: functions and operators that shadow the
-- pg_catalog ones the extension uses, and tables named like its own.
-- Every trap raises an error naming itself, so any use of one shows.
--
CREATE SCHEMA evil;
CREATE FUNCTION evil.now() RETURNS timestamptz
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil now() called'; END $$;
CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil clock_timestamp() called'; END $$;
CREATE FUNCTION evil.nextval(regclass) RETURNS bigint
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil nextval() called'; END $$;
CREATE FUNCTION evil.hashtext(text) RETURNS int
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil hashtext() called'; END $$;
CREATE FUNCTION evil.pg_advisory_xact_lock(int, int) RETURNS void
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil pg_advisory_xact_lock() called'; END $$;
CREATE FUNCTION evil.jsonb_typeof(jsonb) RETURNS text
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil jsonb_typeof() called'; END $$;
CREATE FUNCTION evil.jsonb_array_elements(jsonb) RETURNS SETOF jsonb
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil jsonb_array_elements() called'; END $$;
CREATE FUNCTION evil.unnest(bigint[]) RETURNS SETOF bigint
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil unnest() called'; END $$;
CREATE FUNCTION evil.eq_int8(bigint, bigint) RETURNS boolean
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil bigint = called'; END $$;
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.eq_int8);
CREATE FUNCTION evil.eq_text(text, text) RETURNS boolean
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil text = called'; END $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.eq_text);
CREATE FUNCTION evil.concat_text(text, text) RETURNS text
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil || called'; END $$;
CREATE OPERATOR evil.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.concat_text);
-- a regex operator that would let any name through
CREATE FUNCTION evil.not_match(text, text) RETURNS boolean
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil !~ called'; END $$;
CREATE OPERATOR evil.!~ (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.not_match);
CREATE FUNCTION evil.mod_int8(bigint, integer) RETURNS bigint
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil %% called'; END $$;
CREATE OPERATOR evil.% (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = evil.mod_int8);
CREATE FUNCTION evil.contains(jsonb, jsonb) RETURNS boolean
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil @> called'; END $$;
CREATE OPERATOR evil.@> (LEFTARG = jsonb, RIGHTARG = jsonb, FUNCTION = evil.contains);
CREATE FUNCTION evil.le_ts(timestamptz, timestamptz) RETURNS boolean
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil timestamptz <= called'; END $$;
CREATE OPERATOR evil.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.le_ts);
CREATE FUNCTION evil.lt_ts(timestamptz, timestamptz) RETURNS boolean
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil timestamptz < called'; END $$;
CREATE OPERATOR evil.< (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.lt_ts);
CREATE FUNCTION evil.pl_ts(timestamptz, interval) RETURNS timestamptz
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil timestamptz + called'; END $$;
CREATE OPERATOR evil.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = evil.pl_ts);
CREATE FUNCTION evil.ne_state(queue.job_state, queue.job_state) RETURNS boolean
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'evil job_state <> called'; END $$;
CREATE OPERATOR evil.<> (LEFTARG = queue.job_state, RIGHTARG = queue.job_state, FUNCTION = evil.ne_state);
-- tables named like the extension's
CREATE TABLE evil.queue_config (LIKE queue.queue_config);
INSERT INTO evil.queue_config (qno, name, max_attempts, lease, backoff_base, backoff_max, retention,
                               max_running, group_retry, paused, created_at, archive_seg, archive_since,
                               rate_period, group_max_running)
VALUES (999998, 'sec_q', 1, '1 second', '0', '0', '0', 1, 'requeue', true, '2000-01-01', 0, '{}', '1 second', 1);
CREATE TABLE evil._job (LIKE queue._job);
CREATE TABLE evil.q_sec_q (LIKE queue._job);
CREATE TABLE evil.a_sec_q (LIKE queue._archive);
CREATE TABLE evil.s_sec_q (LIKE queue._slot);
CREATE SEQUENCE evil."q_sec_q$seq" START 777;
CREATE TEMP TABLE queue_config (LIKE queue.queue_config);
CREATE TEMP TABLE q_sec_q (LIKE queue._job);

-- The traps work, for code that does not pin its search_path.
SET search_path = evil, pg_catalog, public;
SELECT now();
SELECT 1::bigint = 1::bigint;
SELECT 'a'::text = 'a'::text;
SELECT '{}'::jsonb @> '{}'::jsonb;
SELECT count(*) FROM queue_config;
SELECT count(*) FROM evil.queue_config;

--
-- Every function of the extension, called under that search_path.
--
SELECT queue.create('sec_q', backoff_base => '0');
SELECT queue.create('sec_q', if_not_exists => true);
SELECT queue.create('sec_dead', max_attempts => 1);
SELECT queue.alter('sec_q', max_attempts => 3, max_running => 10, group_retry => 'requeue');
SELECT queue.pause('sec_q');
SELECT queue.resume('sec_q');
SELECT queue.enqueue('sec_q', '{"n": 1, "companyId": 3345}') AS s1 \gset
SELECT queue.enqueue('sec_q', '{"n": 2}', priority => 1, group_key => 'g') AS s2 \gset
SELECT queue.enqueue('sec_q', '{"n": 11}', group_key => 'g') AS s11 \gset
SELECT queue.enqueue('sec_q', '{"n": 3}', dedup_key => 'k') AS s3 \gset
SELECT queue.enqueue('sec_q', '{"n": 3}', dedup_key => 'k') AS s3_again \gset
SELECT queue.enqueue('sec_q', '{"n": 4}', delay => '1 hour') AS s4 \gset
SELECT queue.enqueue('sec_q', '{"n": 5}', run_at => '2000-01-01') AS s5 \gset
SELECT array_agg(b) AS batch FROM queue.enqueue_batch('sec_q', ARRAY['{"n": 6}', '{"n": 7}']::jsonb[]) b \gset
SELECT payload, attempt, group_key FROM queue.claim('sec_q', 2);
SELECT queue.complete(:s2);
SELECT queue.fail(:s1, 'failed under evil');
SELECT payload, attempt FROM queue.claim('sec_q', 1, '1 minute');
SELECT queue.extend(:s3, '2 minutes') IS NOT NULL AS extended;
SELECT queue.release(:s3);
SELECT queue.reschedule(:s4, '2000-01-01', priority => 2);
SELECT queue.cancel(:s5);
SELECT payload FROM queue.claim('sec_q', 10);
SELECT queue.complete(:'batch'::bigint[]);
SELECT queue.complete(:s3, 2);
SELECT queue.enqueue('sec_q', '{"n": 9, "companyId": 3345}') AS s9 \gset
SELECT queue.enqueue('sec_q', '{"n": 10}') AS s10 \gset
SELECT queue.purge('sec_q', '{"companyId": 3345}');
SELECT queue.purge('sec_q');
SELECT queue.enqueue('sec_dead', '{"n": 8}') AS s8 \gset
SELECT count(*) FROM queue.claim('sec_dead');
SELECT queue.fail(:s8, 'dead under evil');
SELECT queue.retry(:s8);
SELECT count(*) FROM queue.claim('sec_dead', lease => '1 millisecond');
SELECT pg_sleep(0.05);
SELECT queue FROM queue.tick() WHERE queue OPERATOR(pg_catalog.=) 'sec_dead';
SELECT event, attempt, detail FROM queue.history(:s2);
SELECT event, attempt, detail FROM queue.history(:s8);
SELECT queue, state, payload, attempt, last_error FROM queue.jobs
 WHERE queue OPERATOR(pg_catalog.=) 'sec_dead';
SELECT queue, ready, scheduled, running, dead FROM queue.stats
 WHERE queue OPERATOR(pg_catalog.~) '^sec_' ORDER BY queue;
SELECT queue, max_attempts, paused FROM queue.queues
 WHERE queue OPERATOR(pg_catalog.~) '^sec_' ORDER BY queue;
-- errors are the extension's own, not the traps'
SELECT queue.enqueue('x; drop table y', '{}');
SELECT queue.create('Bad');
SELECT queue.purge('sec_q', '[1]');
SELECT queue.enqueue('sec_nope', '{}');
RESET search_path;

-- What it all did, looked at with the normal search_path: the real queue
-- tables were used, the traps' tables were not touched.
SELECT queue, max_attempts, lease, backoff_base, paused, max_running, group_retry FROM queue.queues WHERE queue LIKE 'sec\_%' ORDER BY queue;
SELECT queue, state, payload, priority, attempt, last_error FROM queue.jobs WHERE queue LIKE 'sec\_%' ORDER BY queue, id;
SELECT queue, state, payload FROM queue.archive WHERE queue LIKE 'sec\_%' ORDER BY queue, id;
SELECT :s3 = :s3_again AS dedup_worked, :s1 / 1000000 AS first_seq;
SELECT (SELECT count(*) FROM evil.queue_config) AS evil_config,
       (SELECT count(*) FROM evil._job) AS evil_job,
       (SELECT count(*) FROM evil.q_sec_q) AS evil_jobs,
       (SELECT count(*) FROM evil.a_sec_q) AS evil_archive,
       (SELECT count(*) FROM evil.s_sec_q) AS evil_slots,
       (SELECT last_value FROM evil."q_sec_q$seq") AS evil_seq,
       (SELECT count(*) FROM pg_temp.queue_config) AS temp_config,
       (SELECT count(*) FROM pg_temp.q_sec_q) AS temp_jobs;
SET client_min_messages = warning;
DROP SCHEMA evil CASCADE;
RESET client_min_messages;
DROP TABLE pg_temp.queue_config, pg_temp.q_sec_q;

--
-- Queue names are identifiers the extension quotes; anything that is not a
-- plain lowercase name is refused before any SQL runs.
--
SELECT queue.create('sec_a_b');
SELECT queue.enqueue('sec_a_b', '{"n": "a_b"}') > 0 AS enqueued;
SELECT payload FROM queue.claim('sec_a_b');
SELECT count(*) AS queue_relations FROM pg_class WHERE relnamespace = 'queue'::regnamespace \gset
CREATE TABLE sec_victim (x int);
INSERT INTO sec_victim VALUES (1);
SELECT queue.create('sec_x"; DROP TABLE sec_victim; --');
SELECT queue.create('sec_x; DROP TABLE sec_victim');
SELECT queue.enqueue('sec_a_b''; DROP TABLE sec_victim; --', '{}');
SELECT queue.claim('sec_a_b"; DROP TABLE sec_victim; --');
SELECT queue.drop('sec_a_b, sec_victim');
SELECT queue.purge('sec_a_b; DELETE FROM sec_victim');
SELECT count(*) AS victim_rows FROM sec_victim;
SELECT count(*) = :queue_relations AS no_relations_made
  FROM pg_class WHERE relnamespace = 'queue'::regnamespace;
DROP TABLE sec_victim;

--
-- A role without privileges on a queue is refused, with an error, not a
-- crash, and sees no queue at all.
--
SET client_min_messages = warning;
DROP ROLE IF EXISTS regress_queue_nobody;
RESET client_min_messages;
CREATE ROLE regress_queue_nobody;
SET ROLE regress_queue_nobody;
SELECT queue, paused FROM queue.queues WHERE queue = 'sec_q';
SELECT queue.enqueue('sec_q', '{"n": "intruder"}');
SELECT count(*) FROM queue.enqueue_batch('sec_q', ARRAY['{}']::jsonb[]);
SELECT count(*) FROM queue.claim('sec_q');
SELECT queue.purge('sec_q');
SELECT queue.create('sec_intruder');
SELECT queue.drop('sec_q');
SELECT count(*) FROM queue.jobs;
SELECT count(*) FROM queue.archive;
-- nor in queue.stats
SELECT queue, ready, scheduled, running, dead, waiting FROM queue.stats
 WHERE queue LIKE 'sec\_%' ORDER BY queue;
CREATE TABLE queue.sec_intruder (x int);
SET queue.max_payload_size = 100;
RESET ROLE;
SELECT count(*) AS intruder_jobs FROM queue.jobs WHERE payload ? 'n' AND payload->>'n' = 'intruder';
SELECT queue, paused FROM queue.queues WHERE queue LIKE 'sec\_%' ORDER BY queue;
SELECT count(*) FROM queue.queues WHERE queue = 'sec_intruder';
-- granted the queue's privileges, the role can use that queue, with no
-- privilege on its tables
SELECT queue.grant('sec_a_b', 'regress_queue_nobody', 'all');
SET ROLE regress_queue_nobody;
SELECT queue.enqueue('sec_a_b', '{"n": "granted"}') AS granted \gset
SELECT payload FROM queue.claim('sec_a_b');
SELECT queue.complete(:granted);
-- but not another queue
SELECT queue.enqueue('sec_q', '{"n": "intruder"}');
RESET ROLE;
SELECT state, payload FROM queue.archive WHERE queue = 'sec_a_b' ORDER BY id;
SELECT queue.revoke('sec_a_b', 'regress_queue_nobody', 'all');
DROP ROLE regress_queue_nobody;

--
-- Upkeep runs as the queue's owner, to whom pg_stat_activity hides the
-- start time of other roles' sessions: a claimer that is still connected
-- must not look gone to it, and keeps its jobs.
--
CREATE ROLE regress_queue_owner;
SELECT queue.create('sec_owned', lease => '1 hour');
SELECT queue.set_owner('sec_owned', 'regress_queue_owner');
SELECT queue.enqueue('sec_owned', '{"n": "owned"}') AS owned \gset
SELECT id = :owned AS claimed FROM queue.claim('sec_owned');
SET ROLE regress_queue_owner;
SELECT backend_start IS NULL AS owner_sees_no_start
  FROM pg_stat_get_activity(pg_backend_pid());
SELECT expired FROM queue._tick_queue(
    (SELECT c FROM queue.queue_config c WHERE c.name = 'sec_owned'), cleanup => false);
RESET ROLE;
SELECT state, owner_pid = pg_backend_pid() AS ours, last_error FROM queue.q_sec_owned;
SELECT queue.complete(:owned);
SELECT queue.drop('sec_owned');
DROP ROLE regress_queue_owner;

--
-- A read-only transaction writes nothing, on the direct paths as well.
--
SELECT queue.create('sec_ro');
SELECT queue.enqueue('sec_ro', '{"n": 1}') AS ro1 \gset
SELECT queue.enqueue('sec_ro', '{"n": 2}') AS ro2 \gset
SELECT id = :ro1 AS claimed FROM queue.claim('sec_ro');
BEGIN READ ONLY;
SELECT queue.complete(:ro1);
ROLLBACK;
BEGIN READ ONLY;
SELECT count(*) FROM queue.claim('sec_ro');
ROLLBACK;
BEGIN READ ONLY;
SELECT queue.complete(ARRAY[:ro1]::bigint[]);
ROLLBACK;
SELECT id = :ro1 AS claimed_one, state FROM queue.q_sec_ro ORDER BY id;
SELECT count(*) AS archived FROM queue.archive WHERE queue = 'sec_ro';
SELECT queue.drop('sec_ro');

--
-- The internal functions that change a queue's shared state, take its
-- group locks or turn its archive ring refuse roles that may not write the
-- queue's table (EXECUTE on them is public: the API calls them as its
-- caller).
--
CREATE ROLE regress_queue_nobody;
SELECT qno AS sec_qno FROM queue.queue_config WHERE name = 'sec_q' \gset
SELECT count(*) > 0 AS sec_q_has_jobs FROM queue._queue_jobs(:sec_qno);
SET ROLE regress_queue_nobody;
SELECT queue._count(:sec_qno, 'ready', 'dead', 1000);
SELECT * FROM queue._queue_stats(:sec_qno);
-- the rows behind queue.jobs and queue.archive: none of a queue one may not read
SELECT count(*) FROM queue._queue_jobs(:sec_qno);
SELECT count(*) FROM queue._queue_archive(:sec_qno);
SELECT queue._reset_cursor(:sec_qno, true);
SELECT queue._unskip_cursor(:sec_qno);
SELECT queue._new_queue(:sec_qno);
SELECT queue._recount(:sec_qno);
SELECT queue._lock_group(:sec_qno, 'g');
SELECT queue._group_busy(:sec_qno, 'g');
SELECT queue._lock_config(:sec_qno);
SELECT queue._set_archive_seg(:sec_qno, 1, ARRAY[now()]);
-- upkeep's statements run as their caller, whom the tables' rights refuse
SELECT * FROM queue._tick_expire(:sec_qno, 10, 3, now());
SELECT * FROM queue._tick_promote(:sec_qno, now(), NULL, NULL, 10);
SELECT queue._tick_next_due(:sec_qno, now(), 0, 10, '1 s');
SELECT queue._tick_lease_due(:sec_qno);
SELECT queue.set_owner('sec_q', 'regress_queue_nobody');
-- A paused queue refuses its claims too, rather than returning nothing.
RESET ROLE;
SELECT queue.pause('sec_q');
SET ROLE regress_queue_nobody;
SELECT count(*) FROM queue.claim('sec_q');
RESET ROLE;
SELECT queue.resume('sec_q');
SET ROLE regress_queue_nobody;
-- nor for queues that do not exist (their shared state would be made)
SELECT queue._reset_cursor(999999);
SELECT queue._unskip_cursor(999999);
SELECT * FROM queue._tick_promote(999999, now(), NULL, NULL, 10);
SELECT queue._count(0, 'ready', 'dead', 1);
SELECT queue._lock_group(-1, 'g');
RESET ROLE;
DROP ROLE regress_queue_nobody;
-- not even its owner can point the archive ring outside itself
SELECT queue._set_archive_seg(:sec_qno, 4, archive_since) FROM queue.queue_config WHERE qno = :sec_qno;
SELECT queue._set_archive_seg(:sec_qno, 0, '{}') FROM queue.queue_config WHERE qno = :sec_qno;
SELECT archive_seg FROM queue.queue_config WHERE qno = :sec_qno;

--
-- A consumer with the consume privilege (and none on the tables) claims
-- in a transaction: its jobs are held and written back at commit, as the
-- queue's owner.
--
CREATE ROLE regress_queue_consumer;
SELECT queue.create('sec_cons');
SELECT queue.grant('sec_cons', 'regress_queue_consumer', 'consume');
SELECT count(queue.enqueue('sec_cons', jsonb_build_object('n', i))) FROM generate_series(1, 2) i;
SET ROLE regress_queue_consumer;
BEGIN;
SELECT payload FROM queue.claim('sec_cons');
COMMIT;
BEGIN;
SELECT queue.complete(id) FROM queue.claim('sec_cons');
COMMIT;
RESET ROLE;
SELECT payload->>'n' AS n, state FROM queue.q_sec_cons;
SELECT payload->>'n' AS n, state FROM queue.archive WHERE queue = 'sec_cons';
-- A claim made in a SECURITY DEFINER function is written back at commit
-- with the rights it was made with, not those of the role committing.
CREATE FUNCTION public.sec_take_one() RETURNS bigint LANGUAGE sql SECURITY DEFINER
    SET search_path = pg_catalog AS $$ SELECT id FROM queue.claim('sec_cons') $$;
GRANT EXECUTE ON FUNCTION public.sec_take_one() TO regress_queue_consumer;
SELECT queue.revoke('sec_cons', 'regress_queue_consumer', 'consume');
SELECT count(queue.enqueue('sec_cons', '{"n": 3}'));
SET ROLE regress_queue_consumer;
BEGIN;
SELECT public.sec_take_one() IS NOT NULL AS took;
COMMIT;
RESET ROLE;
SELECT payload->>'n' AS n, state FROM queue.q_sec_cons ORDER BY id;
DROP FUNCTION public.sec_take_one();
SELECT queue.drop('sec_cons');
DROP ROLE regress_queue_consumer;

--
-- set_owner gives a queue's tables to a role.  queue.stats runs with the
-- extension owner's rights and reads each queue's table as the table's
-- owner, so that the owner cannot have it run code of theirs with those
-- rights.
--
CREATE ROLE regress_queue_owner;
SELECT queue.create('sec_stats');
SELECT queue.enqueue('sec_stats', '{"n": 1}') AS st1 \gset
SELECT queue.set_owner('sec_stats', 'regress_queue_owner');
SELECT c.relname, c.relowner::regrole
  FROM pg_class c WHERE c.relnamespace = 'queue'::regnamespace AND c.relkind IN ('r', 'p', 'S')
   AND c.relname ~ '^[qas]_sec_stats($|\$)' ORDER BY 1;
-- (a wholesale change: shared memory forgets the counts, stats counts)
SELECT queue._recount(qno) FROM queue.queue_config WHERE name = 'sec_stats';
SELECT ready, running, oldest_ready_age IS NOT NULL AS has_age FROM queue.stats WHERE queue = 'sec_stats';
-- tick() by the owner maintains its queue, and only that one; a
-- superuser's leaves it to its owner
SET ROLE regress_queue_owner;
SELECT queue, promoted, expired FROM queue.tick();
RESET ROLE;
SELECT count(*) AS superuser_ticked FROM queue.tick() WHERE queue = 'sec_stats';
SELECT queue.set_owner('sec_stats', NULL);
SELECT queue.set_owner('sec_nope', current_user::regrole);
SELECT queue.complete(id) FROM queue.claim('sec_stats');
-- The owner turns its (now empty) table into a view whose reading runs a
-- function of theirs, which fails if it runs as a superuser.
CREATE SCHEMA regress_evil AUTHORIZATION regress_queue_owner;
SET ROLE regress_queue_owner;
CREATE FUNCTION regress_evil.probe() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'the owner''s code ran as a superuser';
    END IF;
    RETURN false;
END $$;
ALTER TABLE queue.q_sec_stats NO INHERIT queue._job;
DROP INDEX queue."q_sec_stats$ready", queue."q_sec_stats$running", queue."q_sec_stats$scheduled",
    queue."q_sec_stats$dedup", queue."q_sec_stats$group", queue."q_sec_stats$head";
ALTER TABLE queue.q_sec_stats DROP CONSTRAINT "q_sec_stats$pkey";
RESET ROLE;
TRUNCATE queue.q_sec_stats;
VACUUM queue.q_sec_stats;
SET ROLE regress_queue_owner;
CREATE RULE "_RETURN" AS ON SELECT TO queue.q_sec_stats DO INSTEAD
SELECT 0::bigint AS id, 0::bigint AS rank, now() AS run_at, now() AS enqueued_at,
       NULL::timestamptz AS claimed_at, NULL::timestamptz AS lease_until,
       NULL::timestamptz AS owner_start, 'ready'::queue.job_state AS state, 0 AS priority,
       0 AS attempt, 0 AS uncounted, NULL::int AS owner_pid, NULL::text AS group_key,
       NULL::text AS dedup_key, NULL::text AS last_error, NULL::jsonb AS history,
       '{}'::jsonb AS payload
 WHERE regress_evil.probe();
RESET ROLE;
SELECT relkind FROM pg_class WHERE oid = 'queue.q_sec_stats'::regclass;
SELECT count(*) FROM queue.q_sec_stats;
SELECT queue._recount(qno) FROM queue.queue_config WHERE name = 'sec_stats';
SELECT ready, running FROM queue.stats WHERE queue = 'sec_stats';
DROP VIEW queue.q_sec_stats;
CREATE TABLE queue.q_sec_stats ();
SELECT queue.drop('sec_stats');
DROP SCHEMA regress_evil CASCADE;
DROP ROLE regress_queue_owner;

--
-- DROP OWNED ... CASCADE, the usual way to remove a role, drops the
-- tables of the queues the role owns, but not their rows in queue_config:
-- such a queue says what happened when used, and queue.drop() still
-- removes it (it used to fail, as the queue's table was missing).
--
CREATE ROLE regress_queue_owner;
SELECT queue.create('sec_owned');
SELECT queue.set_owner('sec_owned', 'regress_queue_owner');
SELECT queue.enqueue('sec_owned', '{}') > 0 AS enqueued;
DROP OWNED BY regress_queue_owner CASCADE;
DROP ROLE regress_queue_owner;
\c
SELECT * FROM queue.claim('sec_owned');
SELECT queue.drop('sec_owned');
SELECT count(*) FROM queue.queues WHERE queue = 'sec_owned';
SELECT queue.create('sec_owned');
SELECT queue.enqueue('sec_owned', '{}') > 0 AS enqueued;
SELECT queue.drop('sec_owned');

--
-- Every valid name is usable, also names that extend another queue's
-- name the way the extension names a queue's own objects.
--
SELECT queue.create('sec_mail');
SELECT queue.create('sec_mail_seq');
SELECT queue.create('sec_mail_ready');
SELECT queue.create('sec_mail_running');
SELECT queue.create('sec_mail_pkey');
SELECT queue.create('sec_late_seq');
SELECT queue.create('sec_late');
SELECT queue FROM queue.queues WHERE queue LIKE 'sec\_mail%' OR queue LIKE 'sec\_late%' ORDER BY queue;
