/* queue--0.4--0.5.sql: upgrade from 0.4 to 0.5 (periodic jobs: queue.schedule) */

\echo Use "ALTER EXTENSION queue UPDATE TO '0.5'" to load this file. \quit

/* ==============================================================
 * Periodic jobs: schedules (src/ops/schedule.c, src/ops/fire.c)
 *
 * Each tick of a schedule becomes one job in the transaction that moves
 * next_run_at on, so that a tick is fired once whatever crashes: a
 * transaction that did not commit fired nothing.
 * ============================================================== */

CREATE TABLE queue.queue_schedules (
    name          text PRIMARY KEY,
    qno           int NOT NULL REFERENCES queue.queue_config (qno) ON DELETE CASCADE,
    cron          text,
    every         interval,
    timezone      text NOT NULL,
    payload       jsonb NOT NULL,
    priority      int NOT NULL,
    group_key     text,
    overlap       text NOT NULL CHECK (overlap IN ('allow', 'skip')),
    catch_up      text NOT NULL CHECK (catch_up IN ('none', 'one', 'all')),
    paused        boolean NOT NULL DEFAULT false,
    next_run_at   timestamptz NOT NULL,   -- the next tick
    last_run_at   timestamptz,            -- the tick of the last job it enqueued
    last_job_id   bigint,
    overlap_skips bigint NOT NULL DEFAULT 0,  -- ticks that got no job: the last was unfinished
    -- a tick whose job could not be enqueued is tried again at retry_at
    retry_at      timestamptz,
    failures      int NOT NULL DEFAULT 0,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT queue_schedules_kind CHECK ((cron IS NULL) <> (every IS NULL))
);

-- what the worker looks up: the schedules due first
CREATE INDEX queue_schedules_due ON queue.queue_schedules ((coalesce(retry_at, next_run_at)))
 WHERE NOT paused;
CREATE INDEX queue_schedules_qno ON queue.queue_schedules (qno);

SELECT pg_catalog.pg_extension_config_dump('queue.queue_schedules', '');

-- After a statement that changes schedules, the worker looks again when
-- the transaction commits (a trigger, so that a restore wakes it too).
CREATE FUNCTION queue._schedules_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'queue_schedules_changed'
LANGUAGE C;

CREATE TRIGGER schedules_changed AFTER INSERT OR UPDATE OR DELETE ON queue.queue_schedules
    FOR EACH STATEMENT EXECUTE FUNCTION queue._schedules_changed();

CREATE FUNCTION queue.schedule(
    name      text,
    queue     text,
    cron      text DEFAULT NULL,
    payload   jsonb DEFAULT '{}',
    every     interval DEFAULT NULL,
    timezone  text DEFAULT 'UTC',
    priority  int DEFAULT 0,
    group_key text DEFAULT NULL,
    overlap   text DEFAULT 'allow',
    catch_up  text DEFAULT 'one')
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'queue_schedule'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.unschedule(name text, if_exists boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_unschedule'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.pause_schedule(name text)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_pause_schedule'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.resume_schedule(name text)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'queue_resume_schedule'
LANGUAGE C VOLATILE;

-- The next n ticks of a cron expression after a time, in a time zone.
CREATE FUNCTION queue.cron_ticks(cron text, timezone text DEFAULT 'UTC',
    after timestamptz DEFAULT now(), n int DEFAULT 5)
RETURNS SETOF timestamptz
AS 'MODULE_PATHNAME', 'queue_cron_ticks'
LANGUAGE C STABLE;

-- The due ticks of the schedules of queues the caller may produce into
-- (queue.tick()); returns the jobs enqueued.
CREATE FUNCTION queue._fire_schedules()
RETURNS bigint
AS 'MODULE_PATHNAME', 'queue_fire_schedules'
LANGUAGE C VOLATILE;

CREATE VIEW queue.schedules WITH (security_barrier) AS
SELECT s.name, c.name AS queue, s.cron, s.every, s.timezone, s.payload, s.next_run_at,
       s.last_run_at, s.last_job_id, s.paused, s.priority, s.group_key, s.overlap, s.catch_up,
       s.overlap_skips, s.retry_at, s.last_error, s.created_at
  FROM queue.queue_schedules s
  JOIN queue.queue_config c ON c.qno = s.qno
 WHERE queue._may(c.qno, 'read') OR queue._may(c.qno, 'manage');

GRANT SELECT ON queue.schedules TO PUBLIC;

CREATE OR REPLACE FUNCTION queue.tick()
RETURNS TABLE (queue text, promoted bigint, expired bigint, deleted bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r queue.queue_config;
    t record;
    rs queue.queue_config[] := '{}';
    ps bigint[] := '{}';
    es bigint[] := '{}';
    ds bigint[] := '{}';
    n bigint;
BEGIN
    -- ticks of schedules first: their jobs are new work of this pass
    PERFORM queue._fire_schedules();
    -- The queues whose tables the caller owns; for a superuser, those a
    -- superuser owns.  Upkeep of the others would fail for want of
    -- privileges, or run their owner's triggers with the caller's wider
    -- rights (the worker runs it as the owner).
    FOR r IN SELECT c.* FROM queue.queue_config c
               JOIN pg_class cl ON cl.relname = 'q_' || c.name AND cl.relnamespace = 'queue'::regnamespace
               JOIN pg_roles o ON o.oid = cl.relowner
               JOIN pg_roles u ON u.rolname = current_user
              WHERE cl.relowner = u.oid OR (o.rolsuper AND u.rolsuper)
              ORDER BY c.qno LOOP
        rs := rs || r;
    END LOOP;
    FOR i IN 1 .. cardinality(rs) LOOP
        promoted := 0; expired := 0; deleted := 0;
        LOOP
            t := queue._tick_queue(rs[i]);
            promoted := promoted + t.promoted;
            expired := expired + t.expired;
            deleted := deleted + t.deleted;
            EXIT WHEN t.promoted < 1000 AND t.expired < 1000 AND t.deleted < 10000;
        END LOOP;
        ps := ps || promoted;
        es := es || expired;
        ds := ds || deleted;
    END LOOP;
    -- batch leases last, as the worker ends them (see queue._end_leases)
    FOR i IN 1 .. cardinality(rs) LOOP
        queue := rs[i].name;
        promoted := ps[i];
        expired := es[i];
        deleted := ds[i];
        LOOP
            n := queue._end_leases(rs[i]);
            expired := expired + n;
            EXIT WHEN n < 1000;
        END LOOP;
        RETURN NEXT;
    END LOOP;
END
$$;
