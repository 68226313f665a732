/* queue--0.5--0.6.sql: upgrade from 0.5 to 0.6 (many queues: views and
 * statistics that read one queue at a time, an idle worker that passes
 * over idle queues) */

\echo Use "ALTER EXTENSION queue UPDATE TO '0.6'" to load this file. \quit

-- The rows of one queue's tables, read with their locks given back at
-- once (src/ops/rows.c): the views below call them once per queue, so
-- that a query on them holds the locks of one queue at a time.  For a
-- queue the caller may not read they return no rows.
CREATE FUNCTION queue._queue_jobs(qno int)
RETURNS TABLE (id bigint, state text, payload jsonb, priority int, run_at timestamptz, attempt int,
               group_key text, dedup_key text, enqueued_at timestamptz, claimed_at timestamptz,
               lease_until timestamptz, last_error text)
AS 'MODULE_PATHNAME', 'queue_queue_jobs'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._queue_archive(qno int)
RETURNS TABLE (id bigint, state text, payload jsonb, priority int, run_at timestamptz, attempt int,
               group_key text, dedup_key text, enqueued_at timestamptz, claimed_at timestamptz,
               finished_at timestamptz, last_error text)
AS 'MODULE_PATHNAME', 'queue_queue_archive'
LANGUAGE C VOLATILE STRICT;

-- A queue's row of queue.stats, from shared memory where it knows
-- (src/ops/stats.c); for a role that may read the queue.
CREATE FUNCTION queue._queue_stats(qno int,
    OUT ready bigint, OUT scheduled bigint, OUT running bigint, OUT dead bigint,
    OUT oldest_ready_age interval, OUT completed_last_minute bigint, OUT failed_last_minute bigint,
    OUT waiting bigint, OUT shared_state boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'queue_queue_stats'
LANGUAGE C VOLATILE STRICT;

/*
 * When queue r's archive ring may next have work for queue._rotate_archive
 * at or after time t, if no job were archived meanwhile: a segment other
 * than the current one expires retention after the segment after it
 * began; the current one turns once it is due to and the next segment is
 * empty or expired.  NULL: not before a job is archived.  The worker keeps
 * it in shared memory, so that its cleanup passes over idle queues
 * (src/worker/upkeep.c); a job archived forgets it.
 */
CREATE FUNCTION queue._archive_next(r queue.queue_config, t timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    nseg int := queue._archive_segments();
    cur  int := r.archive_seg;
    nxt  int := (r.archive_seg + 1) % nseg;
    next_work timestamptz;
    expires timestamptz[] := '{}';
BEGIN
    FOR k IN 0 .. nseg - 1 LOOP
        expires := expires || CASE WHEN k <> cur AND pg_relation_size(queue._archive_segment(r.name, k)) > 0
                                   THEN coalesce(r.archive_since[(k + 1) % nseg + 1] + r.retention, t) END;
    END LOOP;
    SELECT min(e) INTO next_work FROM unnest(expires) e;
    IF pg_relation_size(queue._archive_segment(r.name, cur)) > 0 THEN
        next_work := least(next_work, greatest(coalesce(r.archive_since[cur + 1] + r.retention / (nseg - 1), t),
                                               expires[nxt + 1]));
    END IF;
    RETURN next_work;
END
$$;

-- for the worker, which runs as a superuser
REVOKE EXECUTE ON FUNCTION queue._archive_next(queue.queue_config, timestamptz) FROM PUBLIC;

-- The views read each queue through the functions above instead of the
-- parents queue._job and queue._archive, whose every child the planner
-- locked in one statement.
CREATE OR REPLACE VIEW queue._job_rows WITH (security_barrier) AS
SELECT c.name AS queue, j.id, j.state, j.payload, j.priority, j.run_at, j.attempt, c.max_attempts,
       j.group_key, j.dedup_key, j.enqueued_at, j.claimed_at, j.lease_until, j.last_error
  FROM queue.queue_config c, LATERAL queue._queue_jobs(c.qno) j
 WHERE queue._may(c.qno, 'read');

CREATE OR REPLACE VIEW queue.archive WITH (security_barrier) AS
SELECT c.name AS queue, a.id, a.state, a.payload, a.priority, a.run_at,
       a.attempt, a.group_key, a.dedup_key, a.enqueued_at, a.claimed_at,
       a.finished_at, a.last_error
  FROM queue.queue_config c, LATERAL queue._queue_archive(c.qno) a
 WHERE queue._may(c.qno, 'read');

CREATE OR REPLACE VIEW queue.stats WITH (security_barrier) AS
SELECT c.name AS queue, s.ready, s.scheduled, s.running, s.dead,
       s.oldest_ready_age, s.completed_last_minute, s.failed_last_minute, s.waiting,
       s.shared_state
  FROM queue.queue_config c, LATERAL queue._queue_stats(c.qno) s
 WHERE queue._may(c.qno, 'read');

-- what queue.stats of 0.5 was made of
DROP FUNCTION queue._stats(queue.queue_config);
DROP FUNCTION queue._table_stats(int, boolean, bigint);
DROP FUNCTION queue._counts(int);
DROP FUNCTION queue._recent_counts(int);
DROP FUNCTION queue._shared_state(int);
