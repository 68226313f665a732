/* queue--0.1--0.2.sql: upgrade of the queue extension from 0.1 to 0.2 */

\echo Use "ALTER EXTENSION queue UPDATE TO '0.2'" to load this file. \quit

-- The queue number of a job id, in one place (src/base/jobid.h).
CREATE FUNCTION queue._qno(id bigint)
RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (id % 1000000)::int;

CREATE OR REPLACE FUNCTION queue._queue_of(id bigint)
RETURNS queue.queue_config
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r queue.queue_config;
BEGIN
    IF id IS NULL THEN
        RAISE EXCEPTION 'job id must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass the id returned by queue.enqueue() or queue.claim().';
    END IF;
    SELECT * INTO r FROM queue.queue_config c WHERE c.qno = queue._qno(id);
    IF NOT FOUND OR id <= 0 THEN
        RAISE EXCEPTION 'job % does not exist', id
            USING ERRCODE = 'undefined_object',
                  HINT = 'Job ids are returned by queue.enqueue(); finished jobs are listed in queue.archive.';
    END IF;
    RETURN r;
END
$$;

CREATE OR REPLACE VIEW queue.jobs AS
SELECT c.name AS queue,
       j.id,
       CASE WHEN l.id IS NULL THEN j.state::text ELSE 'running' END AS state,
       j.payload, j.priority, j.run_at, j.attempt + (l.id IS NOT NULL)::int AS attempt, c.max_attempts,
       j.group_key, j.dedup_key, j.enqueued_at,
       CASE WHEN l.id IS NULL THEN j.claimed_at ELSE l.claimed_at END AS claimed_at,
       CASE WHEN l.id IS NULL THEN j.lease_until ELSE l.lease_until END AS lease_until,
       j.last_error
  FROM queue._job j
  JOIN queue.queue_config c ON c.qno = queue._qno(j.id)
  -- jobs under a batch lease: ready rows at the attempt a lease lists (src/xact/leases.c)
  LEFT JOIN (SELECT u.id, u.attempt, b.claimed_at, b.lease_until
               FROM queue._lease b, unnest(b.ids, b.attempts) AS u(id, attempt)) l
         ON l.id = j.id AND l.attempt = j.attempt AND j.state = 'ready'
UNION ALL
-- jobs the current transaction claimed: running, to it (src/xact/held.c)
SELECT c.name, h.id, 'running', h.payload, h.priority, h.run_at, h.attempt,
       c.max_attempts, h.group_key, h.dedup_key, h.enqueued_at, h.claimed_at,
       h.lease_until, h.last_error
  FROM queue._held() h
  JOIN queue.queue_config c ON c.qno = queue._qno(h.id);

CREATE OR REPLACE VIEW queue.archive AS
SELECT c.name AS queue, a.id, a.state, a.payload, a.priority, a.run_at,
       a.attempt, a.group_key, a.dedup_key, a.enqueued_at, a.claimed_at,
       a.finished_at, a.last_error
  FROM queue._archive a
  JOIN queue.queue_config c ON c.qno = queue._qno(a.id);

CREATE OR REPLACE FUNCTION queue._stats(r queue.queue_config,
    OUT ready bigint, OUT scheduled bigint, OUT running bigint, OUT dead bigint,
    OUT waiting bigint, OUT oldest_ready_age interval,
    OUT completed_last_minute bigint, OUT failed_last_minute bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c record;
    t record;
BEGIN
    -- Counts come from shared memory, kept by committing transactions.
    -- When they are not known there (after a restart, or after a change
    -- made wholesale) they are counted once, and kept unless something
    -- changed meanwhile: c.gen is read before the count's snapshot.
    c := queue._counts(r.qno);
    t := queue._table_stats(r.qno, NOT c.valid);
    oldest_ready_age := t.oldest_ready_age;
    IF c.valid THEN
        ready := c.ready; scheduled := c.scheduled; running := c.running;
        dead := c.dead; waiting := c.waiting;
    ELSIF t.ready IS NOT NULL THEN
        ready := t.ready; scheduled := t.scheduled; running := t.running;
        dead := t.dead; waiting := t.waiting;
        PERFORM queue._set_counts(r.qno, c.gen, ready, scheduled, running, dead, waiting);
    END IF;
    -- jobs this transaction claimed and holds (src/xact/held.c)
    running := running + (SELECT count(*) FROM queue._held() h WHERE queue._qno(h.id) = r.qno);

    SELECT rc.completed, rc.failed INTO completed_last_minute, failed_last_minute
      FROM queue._recent_counts(r.qno) rc;
END
$$;

CREATE OR REPLACE FUNCTION queue.history(id bigint)
RETURNS TABLE (at timestamptz, event text, attempt int, detail text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r      queue.queue_config := queue._queue_of(id);
    job    record;
    leased_at timestamptz;
    fin    timestamptz;
    fstate text;
    cur    text;
BEGIN
    -- jobs this transaction claimed are rows again (src/xact/held.c)
    PERFORM queue._write_back();
    EXECUTE format('SELECT enqueued_at, claimed_at, attempt, history, state::text AS state, last_error'
                   '  FROM queue.%I WHERE id = $1', 'q_' || r.name)
       INTO job USING id;
    -- under a batch lease, the job's claim is the lease's (src/xact/leases.c)
    IF job.state = 'ready' THEN
        leased_at := queue._lease_claimed_at(id, job.attempt);
        IF leased_at IS NOT NULL THEN
            job.claimed_at := leased_at;
            job.attempt := job.attempt + 1;
            job.state := 'running';
        END IF;
    END IF;
    IF job IS NULL THEN
        EXECUTE format('SELECT enqueued_at, claimed_at, attempt, history, state, last_error, finished_at'
                       '  FROM queue.%I WHERE id = $1', 'a_' || r.name)
           INTO job USING id;
        IF job IS NULL THEN
            RAISE EXCEPTION 'job % does not exist', id
                USING ERRCODE = 'undefined_object',
                      HINT = 'Finished jobs are kept only for the queue''s retention.';
        END IF;
        fin := job.finished_at;
        fstate := job.state;
    END IF;
    cur := job.state;

    RETURN QUERY
    WITH ev AS (
        SELECT job.enqueued_at AS at, 'enqueued'::text AS event, 0 AS attempt, NULL::text AS detail, 0 AS ord
        UNION ALL
        -- past attempts and management actions, kept in the row
        SELECT (h.e->>'claimed_at')::timestamptz, 'claimed', (h.e->>'attempt')::int, NULL, 2 * h.n::int - 1
          FROM jsonb_array_elements(coalesce(job.history, '[]')) WITH ORDINALITY AS h(e, n)
         WHERE h.e ? 'claimed_at'
        UNION ALL
        SELECT (h.e->>'at')::timestamptz, h.e->>'event', (h.e->>'attempt')::int, h.e->>'detail', 2 * h.n::int
          FROM jsonb_array_elements(coalesce(job.history, '[]')) WITH ORDINALITY AS h(e, n)
        UNION ALL
        -- the claim that is running now, or that finished the job
        SELECT job.claimed_at, 'claimed', job.attempt, NULL, 1000000
         WHERE job.claimed_at IS NOT NULL AND (cur = 'running' OR fstate = 'done')
        UNION ALL
        SELECT fin, CASE fstate WHEN 'done' THEN 'completed' ELSE fstate END, job.attempt, NULL, 1000001
         WHERE fin IS NOT NULL
    )
    SELECT ev.at, ev.event, ev.attempt, ev.detail FROM ev ORDER BY ev.at, ev.ord;
END
$$;

CREATE OR REPLACE FUNCTION queue.reschedule(id bigint, run_at timestamptz, priority int DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r  queue.queue_config := queue._queue_of(id);
    st queue.job_state;
BEGIN
    -- jobs this transaction claimed are rows again (src/xact/held.c)
    PERFORM queue._write_back();
    -- Registered first: it must also happen if we abort holding row locks.
    PERFORM queue._reset_cursor(r.qno);
    PERFORM queue._recount(r.qno);
    IF run_at IS NULL THEN
        RAISE EXCEPTION 'run_at must not be null'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass now() to run the job next.';
    END IF;
    IF NOT isfinite(run_at) THEN
        RAISE EXCEPTION 'run_at must be a finite time'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'To hold a job back indefinitely, pause its queue or cancel the job.';
    END IF;
    EXECUTE format('SELECT state FROM queue.%I WHERE id = $1 FOR UPDATE', 'q_' || r.name) INTO st USING id;
    -- (under a batch lease it is running; the row lock keeps it so)
    IF st = 'ready' AND queue._leased(id) THEN
        st := 'running';
    END IF;
    IF st IS NULL OR st NOT IN ('ready', 'scheduled', 'waiting') THEN
        RAISE EXCEPTION 'job % cannot be rescheduled', id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN st IS NULL THEN 'It does not exist or has finished.'
                                ELSE format('It is %s.', st) END,
                  HINT = CASE WHEN st = 'dead' THEN 'Use queue.retry() to give a dead job new attempts.'
                              ELSE 'Only jobs that are not running can be rescheduled.' END;
    END IF;
    EXECUTE format($q$
        UPDATE queue.%1$I
           SET state = CASE WHEN state = 'waiting' THEN 'waiting'
                            WHEN $2 <= clock_timestamp() THEN 'ready'
                            ELSE 'scheduled' END::queue.job_state,
               run_at = greatest($2, enqueued_at),
               priority = coalesce($3, priority),
               rank = CASE WHEN state = 'waiting' THEN rank ELSE nextval('queue.%2$I') END,
               history = coalesce(history, '[]') || jsonb_build_object(
                   'event', 'rescheduled', 'at', clock_timestamp(), 'attempt', attempt, 'detail', 'run_at ' || $2)
         WHERE id = $1$q$, 'q_' || r.name, 'q_' || r.name || '$seq')
    USING id, run_at, priority;
END
$$;

CREATE OR REPLACE FUNCTION queue.cancel(id bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r  queue.queue_config := queue._queue_of(id);
    st queue.job_state;
    g  text;
BEGIN
    -- jobs this transaction claimed are rows again (src/xact/held.c)
    PERFORM queue._write_back();
    -- Registered first: it must also happen if we abort holding row locks.
    PERFORM queue._reset_cursor(r.qno);
    PERFORM queue._recount(r.qno);
    EXECUTE format('SELECT state FROM queue.%I WHERE id = $1 FOR UPDATE', 'q_' || r.name) INTO st USING id;
    -- (under a batch lease it is running; the row lock keeps it so)
    IF st = 'ready' AND queue._leased(id) THEN
        st := 'running';
    END IF;
    IF st IS NULL OR st = 'running' THEN
        RAISE EXCEPTION 'job % cannot be cancelled', id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN st IS NULL THEN 'It does not exist or has finished.'
                                ELSE 'It is running.' END,
                  HINT = CASE WHEN st IS NULL THEN 'Finished jobs are listed in queue.archive.'
                              ELSE 'Let its consumer complete or fail it, or wait for its lease to run out.' END;
    END IF;
    EXECUTE format($q$
        WITH d AS (DELETE FROM queue.%1$I WHERE id = $1 RETURNING *),
             a AS (INSERT INTO queue.%2$I (id, finished_at, run_at, enqueued_at, claimed_at, priority, attempt,
                                           state, group_key, dedup_key, last_error, history, payload)
                   SELECT id, clock_timestamp(), run_at, enqueued_at, claimed_at, priority, attempt,
                          'cancelled', group_key, dedup_key, last_error, history, payload
                     FROM d WHERE $2)
        SELECT group_key FROM d$q$, 'q_' || r.name, 'a_' || r.name)
    INTO g USING id, r.retention > interval '0';
    IF g IS NOT NULL THEN
        PERFORM queue._advance_groups(r.qno, ARRAY[g]);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION queue.retry(id bigint)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r  queue.queue_config := queue._queue_of(id);
    st queue.job_state;
    g  text;
    busy boolean := false;
BEGIN
    -- jobs this transaction claimed are rows again (src/xact/held.c)
    PERFORM queue._write_back();
    -- Registered first: it must also happen if we abort holding row locks.
    PERFORM queue._reset_cursor(r.qno);
    PERFORM queue._recount(r.qno);
    EXECUTE format('SELECT state, group_key FROM queue.%I WHERE id = $1 FOR UPDATE', 'q_' || r.name)
       INTO st, g USING id;
    -- (under a batch lease it is running; the row lock keeps it so)
    IF st = 'ready' AND queue._leased(id) THEN
        st := 'running';
    END IF;
    IF st IS DISTINCT FROM 'dead' THEN
        RAISE EXCEPTION 'job % is not dead', id
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = CASE WHEN st IS NULL THEN 'It does not exist or has finished.'
                                ELSE format('It is %s.', st) END,
                  HINT = 'Only dead jobs can be retried; use queue.reschedule() to move a waiting job.';
    END IF;
    IF g IS NOT NULL THEN
        -- its group went on without it: it waits behind the group's head
        busy := queue._group_busy(r.qno, g);
    END IF;
    BEGIN
        EXECUTE format($q$
            UPDATE queue.%1$I
               SET state = CASE WHEN $2 THEN 'waiting' ELSE 'ready' END::queue.job_state,
                   uncounted = attempt, run_at = clock_timestamp(), rank = nextval('queue.%2$I'),
                   claimed_at = NULL, lease_until = NULL, owner_pid = NULL, owner_start = NULL,
                   history = coalesce(history, '[]') || jsonb_build_object(
                       'event', 'retried', 'at', clock_timestamp(), 'attempt', attempt)
             WHERE id = $1$q$, 'q_' || r.name, 'q_' || r.name || '$seq')
        USING id, busy;
    EXCEPTION WHEN unique_violation THEN
        RAISE EXCEPTION 'job % cannot be retried: another unfinished job has its dedup_key', id
            USING ERRCODE = 'unique_violation',
                  HINT = 'Cancel the dead job, or wait until the other job has finished.';
    END;
END
$$;

CREATE OR REPLACE FUNCTION queue.purge(queue text, filter jsonb DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r queue.queue_config := queue._get(queue);
    n bigint;
    g text;
    groups text[];
BEGIN
    -- jobs this transaction claimed are rows again (src/xact/held.c)
    PERFORM queue._write_back();
    IF filter IS NOT NULL AND jsonb_typeof(filter) <> 'object' THEN
        RAISE EXCEPTION 'purge filter must be a JSON object, not %', jsonb_typeof(filter)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Jobs whose payload contains the filter are deleted, for example ''{"companyId": 3345}''.';
    END IF;
    -- Registered first: it must also happen if we abort holding row locks.
    PERFORM queue._reset_cursor(r.qno);
    PERFORM queue._recount(r.qno);
    -- Running jobs belong to their consumers: they are not purged, nor
    -- ready ones under batch leases, which none may take meanwhile.
    PERFORM queue._hold_leases(r.qno);
    EXECUTE format($q$
        WITH d AS (DELETE FROM queue.%I WHERE state <> 'running' AND ($1 IS NULL OR payload @> $1)
                                          AND NOT (state = 'ready' AND queue._leased(id))
                   RETURNING group_key)
        SELECT count(*), array_agg(DISTINCT group_key) FILTER (WHERE group_key IS NOT NULL) FROM d$q$,
        'q_' || r.name)
    INTO n, groups USING filter;
    PERFORM queue._advance_groups(r.qno, groups);
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION queue._tick_queue(r queue.queue_config, batch int DEFAULT 1000,
    cleanup boolean DEFAULT true,
    OUT promoted bigint, OUT expired bigint, OUT deleted bigint, OUT next_due timestamptz)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t   timestamptz := clock_timestamp();
    dead_groups text[];
    expired_ids bigint[];
    n_dead bigint;
    left_due boolean;
BEGIN
    -- jobs this transaction claimed are rows again (src/xact/held.c)
    PERFORM queue._write_back();

    SELECT x.expired, x.n_dead, x.ids, x.dead_groups
      INTO expired, n_dead, expired_ids, dead_groups
      FROM queue._tick_expire(r.qno, batch, r.max_attempts, t) x;
    IF expired > 0 THEN
        PERFORM queue._free_slots(r.qno, expired_ids);
    END IF;
    PERFORM queue._count(r.qno, 'running', 'dead', n_dead);
    PERFORM queue._count(r.qno, 'running', 'ready', expired - n_dead);
    PERFORM queue._advance_groups(r.qno, dead_groups);

    -- FOR UPDATE locks the latest version of a job that a claim's
    -- promotion made ready after our snapshot, and passes over it: claims
    -- then pass over it too, as one being claimed, until we end.  Our
    -- snapshot still shows it as due and scheduled (left_due), and the
    -- cursor must go back to it when we end (src/ops/claim.c, promote_due).
    SELECT x.promoted, x.left_due INTO promoted, left_due
      FROM queue._tick_promote(r.qno, t, NULL, NULL, batch) x;
    PERFORM queue._count(r.qno, 'scheduled', 'ready', promoted);

    deleted := 0;
    IF cleanup THEN
        deleted := queue._rotate_archive(r, t);
    END IF;

    -- Jobs due by t and still scheduled are held by promotions in flight
    -- (a claim's, whose transaction may stay open): they become ready when
    -- it commits, and its abort brings the due time back (src/xact/pending.c).
    -- Counting them, the queue stayed due and we looked again at once, a
    -- CPU's worth, for as long as one was held.  Unless we stopped at
    -- batch: then more are due now.  Such a job may also be locked by
    -- something that leaves it scheduled (a cancel that rolls back, a
    -- user's FOR UPDATE), which would strand it until the next cleanup:
    -- while one is there, we look again after a naptime.
    next_due := queue._tick_next_due(r.qno, t, promoted, batch,
                                     current_setting('queue.worker_naptime', true)::interval);
    IF has_table_privilege(format('queue.%I', 'l_' || r.name), 'SELECT') THEN
        next_due := least(next_due, queue._tick_lease_due(r.qno));
    END IF;

    -- The due time stays: what we did only makes the true one later, and
    -- the worker stores the one we found (a caller of queue.tick() leaves
    -- the earlier one, which the worker looks at anyway).  Forgotten, the
    -- queue was due again at once after every promotion of ours; under a
    -- stream of jobs due a millisecond apart, that kept the worker
    -- promoting them one pass at a time (half a CPU) and its waiting
    -- claims asleep.
    IF expired + promoted > 0 THEN
        PERFORM queue._reset_cursor(r.qno, keep_due => true);
    ELSIF left_due THEN
        PERFORM queue._unskip_cursor(r.qno);
    END IF;
END
$$;
