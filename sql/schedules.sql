--
-- schedules.sql: periodic jobs.  queue.cron_ticks shows when cron
-- expressions tick, daylight saving time included; queue.schedule and
-- friends, and queue.tick() firing due ticks with each catch_up and
-- overlap mode.
--
-- Queues of this file are named sch_*.  The background worker may be
-- running: a test that makes a tick due (by moving next_run_at back, as
-- a stand-in for the passing of time) fires it with queue.tick() in the
-- same transaction, so that the worker never sees it due.
--
\set SHOW_CONTEXT never
SET timezone = 'UTC';

-- Cron in UTC: 5 fields, 6 with seconds first, names, macros, lists.
SELECT queue.cron_ticks('*/15 * * * *', after => '2026-01-01 10:07:00+00', n => 3);
SELECT queue.cron_ticks('*/20 * * * * *', after => '2026-01-01 10:00:59.5+00', n => 3);
SELECT queue.cron_ticks('0 9 * * mon-fri', after => '2026-01-02 10:00+00', n => 3);
SELECT queue.cron_ticks('0 0 29 feb *', after => '2026-03-01 00:00+00', n => 2);
SELECT queue.cron_ticks('@monthly', after => '2026-01-15 00:00+00', n => 2);
-- both day fields restricted: either matches (the 1st, and Fridays)
SELECT queue.cron_ticks('0 0 1 * fri', after => '2026-03-01 00:00+00', n => 5);

-- Europe/Berlin: clocks go 02:00 CET -> 03:00 CEST on 2026-03-29, and
-- 03:00 CEST -> 02:00 CET on 2026-10-25.
-- 09:00 local every day is 08:00 UTC in winter and 07:00 UTC in summer.
SELECT queue.cron_ticks('0 9 * * *', 'Europe/Berlin', '2026-03-28 00:00+00', 3);
SELECT queue.cron_ticks('0 9 * * *', 'Europe/Berlin', '2026-10-24 00:00+00', 3);
-- 02:30 does not exist on 2026-03-29: that day's tick is at 03:00 CEST
-- (01:00 UTC), the first instant after the gap.
SELECT queue.cron_ticks('30 2 * * *', 'Europe/Berlin', '2026-03-28 00:00+00', 3);
-- 02:30 happens twice on 2026-10-25: the tick is at the first (CEST).
SELECT queue.cron_ticks('30 2 * * *', 'Europe/Berlin', '2026-10-24 00:00+00', 3);
-- an expression for every hour follows real time: both 02:30s tick ...
SELECT queue.cron_ticks('30 * * * *', 'Europe/Berlin', '2026-10-24 23:00+00', 4);
-- ... and in spring the hour that does not exist has no tick
SELECT queue.cron_ticks('30 * * * *', 'Europe/Berlin', '2026-03-28 23:00+00', 3);
-- after the first 02:30 of 2026-10-25, the next is the next day's
SELECT queue.cron_ticks('30 2 * * *', 'Europe/Berlin', '2026-10-25 01:10+00', 1);

-- Schedules.
SELECT queue.create('sch_q');
SELECT queue.create('sch_other');
SELECT queue.schedule('sch-yearly', 'sch_q', '0 0 1 1 *', '{"k": "yearly"}')
       = '2027-01-01 00:00+00' AS next_is_new_year;
SELECT queue.schedule('sch-hourly', 'sch_q', every => '1 hour', payload => '{"k": "hourly"}')
       BETWEEN now() + interval '1 hour' AND clock_timestamp() + interval '1 hour' AS next_in_an_hour;
SELECT queue.schedule('sch-berlin', 'sch_q', '0 9 * * *', timezone => 'europe/berlin') > now() AS scheduled;
SELECT name, queue, cron, every, timezone, payload, paused, priority, group_key, overlap, catch_up,
       last_run_at, last_job_id, overlap_skips, last_error
  FROM queue.schedules WHERE queue LIKE 'sch\_%' ORDER BY name;

-- Replacing a schedule keeps its next tick while its timing stays ...
SELECT next_run_at AS hourly_next FROM queue.schedules WHERE name = 'sch-hourly' \gset
SELECT queue.schedule('sch-hourly', 'sch_q', every => '1 hour', payload => '{"k": "hourly2"}', priority => 5)
       = :'hourly_next' AS kept;
SELECT payload, priority FROM queue.schedules WHERE name = 'sch-hourly';
-- ... and starts afresh when it changes
SELECT queue.schedule('sch-hourly', 'sch_q', every => '2 hours', payload => '{"k": "hourly"}')
       > :'hourly_next' AS moved;
-- the same for cron: the same expression and zone (in any spelling) keep it
SELECT next_run_at AS berlin_next FROM queue.schedules WHERE name = 'sch-berlin' \gset
SELECT queue.schedule('sch-berlin', 'sch_q', '0 9 * * *', '{"v": 2}', timezone => 'Europe/Berlin')
       = :'berlin_next' AS kept;
SELECT queue.schedule('sch-berlin', 'sch_q', '0 9 * * *', timezone => 'America/New_York')
       <> :'berlin_next' AS moved;
SELECT queue.schedule('sch-berlin', 'sch_q', '0 9 * * *', timezone => 'Europe/Berlin')
       = :'berlin_next' AS back;

-- A due tick becomes one job whose run_at is the tick.
BEGIN;
UPDATE queue.queue_schedules SET next_run_at = now() - interval '1 second' WHERE name = 'sch-hourly';
SELECT * FROM queue.tick() WHERE queue = 'sch_q';
SELECT count(*) AS jobs, bool_and(run_at = now() - interval '1 second') AS run_at_is_tick,
       bool_and(payload = '{"k": "hourly"}') AS payload
  FROM queue.jobs WHERE queue = 'sch_q';
SELECT last_run_at = now() - interval '1 second' AS last_run_at,
       last_job_id = (SELECT id FROM queue.jobs WHERE queue = 'sch_q') AS last_job_id,
       next_run_at = now() + interval '2 hours' - interval '1 second' AS next_in_phase
  FROM queue.schedules WHERE name = 'sch-hourly';
-- fired once: a second tick() finds nothing due
SELECT queue._fire_schedules() AS fired_again;
COMMIT;
SELECT queue.purge('sch_q');

-- catch_up: ticks more than a minute late were missed.  An every-minute
-- schedule 10.5 minutes behind has 10 missed ticks and one on time.
SELECT queue.schedule('sch-none', 'sch_other', every => '1 minute', catch_up => 'none', payload => '{"m": "none"}') > now() AS scheduled;
SELECT queue.schedule('sch-one', 'sch_other', every => '1 minute', payload => '{"m": "one"}') > now() AS scheduled;
SELECT queue.schedule('sch-all', 'sch_other', every => '1 minute', catch_up => 'all', payload => '{"m": "all"}') > now() AS scheduled;
BEGIN;
UPDATE queue.queue_schedules SET next_run_at = now() - interval '10 minutes 30 seconds'
 WHERE name IN ('sch-none', 'sch-one', 'sch-all');
SELECT queue._fire_schedules() AS jobs;
SELECT payload->>'m' AS catch_up, count(*) AS jobs,
       array_agg(extract(epoch FROM now() - run_at)::int ORDER BY run_at) AS seconds_late
  FROM queue.jobs WHERE queue = 'sch_other' GROUP BY 1 ORDER BY 1;
SELECT name, next_run_at = now() + interval '30 seconds' AS next_on_time
  FROM queue.schedules WHERE queue = 'sch_other' ORDER BY name;
COMMIT;
SELECT queue.unschedule('sch-none'), queue.unschedule('sch-one'), queue.unschedule('sch-all');
SELECT queue.purge('sch_other');

-- overlap 'skip': no new job while the last one is unfinished.  (A job
-- of a producer is never taken for the schedule's, whatever its keys.)
SELECT queue.enqueue('sch_other', '{"fake": 1}', run_at => now() + interval '1 year',
                     dedup_key => 'schedule:sch-skip') > 0 AS producer_job;
SELECT queue.schedule('sch-skip', 'sch_other', every => '1 minute', overlap => 'skip') > now() AS scheduled;
BEGIN;
UPDATE queue.queue_schedules SET next_run_at = now() - interval '1 second' WHERE name = 'sch-skip';
SELECT queue._fire_schedules() AS jobs;
UPDATE queue.queue_schedules SET next_run_at = now() - interval '1 second' WHERE name = 'sch-skip';
SELECT queue._fire_schedules() AS jobs;
SELECT count(*) AS jobs FROM queue.jobs WHERE queue = 'sch_other' AND dedup_key IS NULL;
SELECT overlap_skips, last_job_id = (SELECT id FROM queue.jobs WHERE queue = 'sch_other' AND dedup_key IS NULL) AS same_job
  FROM queue.schedules WHERE name = 'sch-skip';
COMMIT;
SELECT queue.complete(id, attempt) AS completed FROM queue.claim('sch_other');
BEGIN;
UPDATE queue.queue_schedules SET next_run_at = now() - interval '1 second' WHERE name = 'sch-skip';
SELECT queue._fire_schedules() AS jobs_after_completion;
COMMIT;
SELECT queue.unschedule('sch-skip');
SELECT queue.purge('sch_other');

-- A paused schedule does not tick; resumed, it ticks from now on.
SELECT queue.pause_schedule('sch-berlin');
BEGIN;
UPDATE queue.queue_schedules SET next_run_at = now() - interval '1 hour' WHERE name = 'sch-berlin';
SELECT queue._fire_schedules() AS jobs_while_paused;
SELECT queue.resume_schedule('sch-berlin') > now() AS resumes_in_the_future;
SELECT paused FROM queue.schedules WHERE name = 'sch-berlin';
COMMIT;

-- A tick whose job cannot be enqueued is tried again later; the others fire.
CREATE FUNCTION pg_temp.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$;
SELECT queue.create('sch_broken');
CREATE TRIGGER refuse BEFORE INSERT ON queue.q_sch_broken FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse();
SELECT queue.schedule('sch-broken', 'sch_broken', every => '1 hour') > now() AS scheduled;
SELECT queue.schedule('sch-fine', 'sch_other', every => '1 hour') > now() AS scheduled;
BEGIN;
UPDATE queue.queue_schedules SET next_run_at = now() - interval '1 second' WHERE name IN ('sch-broken', 'sch-fine');
SELECT queue._fire_schedules() AS jobs;
SELECT name, retry_at > now() AS retries_later, last_error,
       next_run_at = now() - interval '1 second' AS tick_kept
  FROM queue.schedules WHERE name IN ('sch-broken', 'sch-fine') ORDER BY name;
COMMIT;
DROP TRIGGER refuse ON queue.q_sch_broken;

-- A row that cannot be read (its time zone gone from tzdata, say) fails
-- alone.
BEGIN;
SELECT queue.schedule('sch-badzone', 'sch_other', '0 9 * * *') > now() AS scheduled;
UPDATE queue.queue_schedules SET timezone = 'Mars/Olympus', next_run_at = now() - interval '1 second'
 WHERE name = 'sch-badzone';
UPDATE queue.queue_schedules SET next_run_at = now() - interval '1 second' WHERE name = 'sch-fine';
SELECT queue._fire_schedules() AS jobs;
SELECT name, last_error FROM queue.schedules WHERE name IN ('sch-badzone', 'sch-fine') ORDER BY name;
ROLLBACK;

-- Dropping a queue drops its schedules.
SELECT queue.drop('sch_broken');
SELECT count(*) FROM queue.schedules WHERE name = 'sch-broken';

-- unschedule
SELECT queue.unschedule('sch-fine');
SELECT queue.unschedule('sch-fine', if_exists => true);

-- Bad input: a clear error, and nothing changed.
CREATE PROCEDURE pg_temp.try(sql text)
LANGUAGE plpgsql AS $$
DECLARE
    st text; msg text; det text; hnt text;
    before text := (SELECT md5(string_agg(s::text, ',' ORDER BY name)) FROM queue.queue_schedules s);
BEGIN
    BEGIN
        EXECUTE sql;
        RAISE NOTICE 'ok';
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
                                hnt = PG_EXCEPTION_HINT;
    END;
    RAISE NOTICE '%: % (detail: %) (hint: %) %', st, msg, coalesce(nullif(det, ''), 'none'),
        coalesce(nullif(hnt, ''), 'NONE'),
        CASE WHEN (SELECT md5(string_agg(s::text, ',' ORDER BY name)) FROM queue.queue_schedules s)
                  IS NOT DISTINCT FROM before THEN 'nothing changed' ELSE 'CHANGED' END;
END
$$;
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '* * *')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '61 * * * *')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '*/0 * * * *')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '0 0 31 2 *')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '0 9 * * * * *')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', 'L * * * *')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '* * * * *', every => '1 minute')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', every => '0.5 seconds')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', every => '-1 hour')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', every => '1 month')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', every => '4000 days')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', every => '1 day', timezone => 'Europe/Berlin')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '0 9 * * *', timezone => 'Mars/Olympus')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '0 9 * * *', timezone => NULL)$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_nope', '0 9 * * *')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', NULL, '0 9 * * *')$$);
CALL pg_temp.try($$SELECT queue.schedule(NULL, 'sch_q', '0 9 * * *')$$);
CALL pg_temp.try($$SELECT queue.schedule('', 'sch_q', '0 9 * * *')$$);
CALL pg_temp.try($$SELECT queue.schedule('x''; DROP TABLE queue.queue_config; --', 'sch_q', '0 9 * * *')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '0 9 * * *', payload => '[1]')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '0 9 * * *', payload => NULL)$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '0 9 * * *', priority => NULL)$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '0 9 * * *', overlap => 'never')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '0 9 * * *', catch_up => 'every')$$);
CALL pg_temp.try($$SELECT queue.schedule('s', 'sch_q', '0 9 * * *', catch_up => NULL)$$);
CALL pg_temp.try($$SELECT queue.unschedule('sch-nope')$$);
CALL pg_temp.try($$SELECT queue.unschedule(NULL)$$);
CALL pg_temp.try($$SELECT queue.pause_schedule('sch-nope')$$);
CALL pg_temp.try($$SELECT queue.resume_schedule('sch-nope')$$);
CALL pg_temp.try($$SELECT queue.cron_ticks('0 9 * * *', n => 0)$$);
CALL pg_temp.try($$SELECT queue.cron_ticks(NULL)$$);

SELECT queue.unschedule('sch-yearly'), queue.unschedule('sch-hourly'), queue.unschedule('sch-berlin');
SELECT queue.drop('sch_q'), queue.drop('sch_other');
