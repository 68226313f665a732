/* queue--0.7.sql: install script for version 0.7 of the queue extension */

\echo Use "CREATE EXTENSION queue" to load this file. \quit

/* ==============================================================
 * Types
 * ============================================================== */

-- waiting: behind an earlier unfinished job of the same group_key
CREATE TYPE queue.job_state AS ENUM ('ready', 'scheduled', 'running', 'dead', 'waiting');

CREATE TYPE queue.claimed AS (
    id          bigint,
    payload     jsonb,
    attempt     int,
    group_key   text,
    enqueued_at timestamptz,
    lease_until timestamptz
);

/* ==============================================================
 * Tables
 * ============================================================== */

/*
 * Catalog.  queue_config holds one row per queue; it and its sequence are
 * extension members marked for pg_dump so that queue definitions survive a
 * dump and restore.  Each queue's own tables (queue.q_<name> for unfinished
 * and dead jobs, queue.a_<name> for the archive) are made by queue.create()
 * and are not extension members, so pg_dump dumps them, data included, like
 * any user table.  They inherit from queue._job and queue._archive, which
 * makes the views span every queue and makes DROP EXTENSION refuse to drop
 * queues that still hold jobs unless CASCADE is given.
 */

CREATE SEQUENCE queue.queue_number_seq MINVALUE 1 MAXVALUE 999999 NO CYCLE;

CREATE TABLE queue.queue_config (
    qno          int PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    max_attempts int NOT NULL,
    lease        interval NOT NULL,
    backoff_base interval NOT NULL,
    backoff_max  interval NOT NULL,
    retention    interval NOT NULL,
    max_running  int,
    group_retry  text NOT NULL DEFAULT 'block' CHECK (group_retry IN ('block', 'requeue')),
    paused       boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- the archive segment finished jobs go to, and when each segment last
    -- began taking them (see queue._rotate_archive)
    archive_seg   smallint NOT NULL DEFAULT 0,
    archive_since timestamptz[] NOT NULL DEFAULT '{}',
    -- at most rate_limit claims per rate_period (src/shmem/ratelimit.c)
    rate_limit   int,
    rate_period  interval NOT NULL DEFAULT '1 second',
    -- how many jobs of one group may be ready, scheduled or running at once
    group_max_running int NOT NULL DEFAULT 1
);

SELECT pg_catalog.pg_extension_config_dump('queue.queue_config', '');

SELECT pg_catalog.pg_extension_config_dump('queue.queue_number_seq', '');

-- A queue's owner may update its row (queue.alter runs as the owner):
-- what queue._check_options allows, the table holds to as well.
ALTER TABLE queue.queue_config ADD CONSTRAINT queue_config_options CHECK (
    max_attempts BETWEEN 1 AND 1000
    AND lease > interval '0' AND lease <= interval '7 days'
    AND backoff_base >= interval '0' AND backoff_base <= interval '1 year'
    AND backoff_max >= backoff_base AND backoff_max <= interval '1 year'
    AND retention >= interval '0'
    AND (max_running IS NULL OR max_running BETWEEN 1 AND 100000)
    AND (rate_limit IS NULL OR rate_limit BETWEEN 1 AND 1000000)
    AND rate_period >= interval '1 millisecond' AND rate_period <= interval '1 day'
    AND group_max_running BETWEEN 1 AND 10000);

/*
 * Privileges on queues (queue.grant): a role with one of them uses the
 * queue through the API, which works on the queue's tables as their owner
 * (src/catalog/acl.c).  Each grantee has a shared dependency on this
 * table, so that DROP ROLE refuses to drop it (src/ops/access.c).
 */
CREATE TABLE queue.queue_grants (
    qno       int NOT NULL REFERENCES queue.queue_config (qno) ON DELETE CASCADE,
    grantee   regrole NOT NULL,
    privilege text NOT NULL CHECK (privilege IN ('produce', 'consume', 'read', 'manage')),
    PRIMARY KEY (qno, grantee, privilege)
);

SELECT pg_catalog.pg_extension_config_dump('queue.queue_grants', '');

/*
 * Columns are ordered for alignment: fixed-width first, payload last so the
 * hot columns stay in the tuple's first cache line.  rank is the claim order
 * inside a priority: it is drawn afresh from the queue's sequence every time
 * a job becomes ready, so ready work always enters behind what claims have
 * already passed (see docs/design.md).
 */
CREATE TABLE queue._job (
    id          bigint NOT NULL,
    rank        bigint NOT NULL,
    run_at      timestamptz NOT NULL,
    enqueued_at timestamptz NOT NULL,
    claimed_at  timestamptz,
    lease_until timestamptz,
    owner_start timestamptz,
    state       queue.job_state NOT NULL,
    priority    int NOT NULL,
    attempt     int NOT NULL,
    uncounted   int NOT NULL DEFAULT 0,     -- attempts released, or before a retry: not toward max_attempts
    owner_pid   int,
    group_key   text,
    dedup_key   text,
    last_error  text,
    history     jsonb,
    payload     jsonb NOT NULL
);

/*
 * The archive is partitioned by queue (queue._qno(id), spelled out: a
 * partition key cannot call a function of the extension), and each queue's archive by segment: a ring of
 * tables that finished jobs fill one at a time, so that removing jobs past
 * retention is a TRUNCATE of a whole segment rather than a DELETE per job
 * (which would write WAL and leave dead rows for every job twice over), and
 * needs no index on finished_at.
 */
CREATE TABLE queue._archive (
    id          bigint NOT NULL,
    finished_at timestamptz NOT NULL,
    run_at      timestamptz NOT NULL,
    enqueued_at timestamptz NOT NULL,
    claimed_at  timestamptz,
    priority    int NOT NULL,
    attempt     int NOT NULL,
    seg         smallint NOT NULL,
    state       text NOT NULL,
    group_key   text,
    dedup_key   text,
    last_error  text,
    history     jsonb,
    payload     jsonb NOT NULL
) PARTITION BY LIST ((id % 1000000));

/*
 * Big values are compressed with lz4 where the server has it (pglz
 * otherwise): it is faster both ways, and gives up on an incompressible
 * value in a fraction of pglz's time, which the archive would otherwise
 * spend again on every such payload it copies (docs/design.md, "Big
 * values").  Queues made later inherit it from these two tables.
 */
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_settings
               WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE queue._job ALTER payload SET COMPRESSION lz4,
            ALTER history SET COMPRESSION lz4, ALTER last_error SET COMPRESSION lz4;
        ALTER TABLE queue._archive ALTER payload SET COMPRESSION lz4,
            ALTER history SET COMPRESSION lz4, ALTER last_error SET COMPRESSION lz4;
    END IF;
END
$$;

/*
 * Batch leases (src/xact/leases.c): a claim of several jobs in a transaction of
 * its own leaves their rows 'ready' and as they are, and records one row
 * here naming them all, with the attempt each row had.  A job is running
 * under such a lease while its row is 'ready' at that attempt: writing the
 * row (as fail, extend, release and the worker do) takes it off the lease.
 */
CREATE TABLE queue._lease (
    lease       bigint NOT NULL,
    lease_until timestamptz NOT NULL,
    claimed_at  timestamptz NOT NULL,
    owner_start timestamptz,
    owner_pid   int,
    ids         bigint[] NOT NULL,
    attempts    int[] NOT NULL
);

-- max_running: one row per allowed running job; job is who holds it
CREATE TABLE queue._slot (
    slot int NOT NULL,
    job  bigint
);

/* ==============================================================
 * Internal functions in C
 *
 * Executable by everyone: the API calls them as its caller.  Those that
 * act on a queue check that the caller has the rights on its tables that
 * the API's callers need (src/catalog/acl.c).
 * ============================================================== */

-- After every statement that changes queue_config, every backend rereads
-- it once the transaction commits.  A trigger, not a function the API
-- calls, so that nobody can make every backend reread it for nothing.
CREATE FUNCTION queue._config_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'queue_config_changed'
LANGUAGE C;

CREATE TRIGGER config_changed AFTER INSERT OR UPDATE OR DELETE ON queue.queue_config
FOR EACH STATEMENT EXECUTE FUNCTION queue._config_changed();

-- Row security of queue_config: a queue's owner (and a superuser) sees
-- and may change its row, as the management functions do when they run as
-- the owner; the views show the rows a role may see (queue._may).
CREATE FUNCTION queue._owns(queue text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_owns'
LANGUAGE C STABLE STRICT;

-- Whether the user has privilege ('any': some privilege) on queue qno.
CREATE FUNCTION queue._may(qno int, privilege text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_may'
LANGUAGE C STABLE STRICT;

CREATE FUNCTION queue._grants_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'queue_grants_changed'
LANGUAGE C;

CREATE TRIGGER config_changed AFTER INSERT OR UPDATE OR DELETE ON queue.queue_grants
    FOR EACH STATEMENT EXECUTE FUNCTION queue._config_changed();

CREATE TRIGGER grants_changed AFTER INSERT OR UPDATE OR DELETE ON queue.queue_grants
    FOR EACH STATEMENT EXECUTE FUNCTION queue._grants_changed();

-- DROP OWNED BY a role revokes its grants on queues too.
CREATE FUNCTION queue._drop_owned()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'queue_drop_owned'
LANGUAGE C;

CREATE EVENT TRIGGER queue_drop_owned ON ddl_command_start WHEN TAG IN ('DROP OWNED')
    EXECUTE FUNCTION queue._drop_owned();

ALTER TABLE queue.queue_config ENABLE ROW LEVEL SECURITY;

CREATE POLICY owner ON queue.queue_config USING (queue._owns(name));

CREATE FUNCTION queue._reset_cursor(qno int, forget boolean DEFAULT false,
    keep_due boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_reset_cursor'
LANGUAGE C VOLATILE STRICT;

-- The statements of queue._tick_queue, as saved plans of the queue
-- (src/catalog/plans.c): planned once per backend instead of on every call.
CREATE FUNCTION queue._tick_expire(qno int, batch int, max_attempts int, t timestamptz,
    OUT expired bigint, OUT n_dead bigint, OUT ids bigint[], OUT dead_groups text[])
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_tick_expire';

-- (the claims' own promotion: see promote_due in src/ops/claim.c)
CREATE FUNCTION queue._tick_promote(qno int, t timestamptz, batch_due timestamptz, left_at timestamptz,
    batch int, OUT promoted bigint, OUT priority int, OUT rank bigint, OUT next_due timestamptz,
    OUT left_due boolean)
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_tick_promote';

CREATE FUNCTION queue._tick_next_due(qno int, t timestamptz, promoted bigint, batch int,
    naptime interval)
RETURNS timestamptz
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_tick_next_due';

CREATE FUNCTION queue._tick_lease_due(qno int)
RETURNS timestamptz
LANGUAGE c
AS 'MODULE_PATHNAME', 'queue_tick_lease_due';

CREATE FUNCTION queue._unskip_cursor(qno int)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_unskip_cursor'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._lock_group(qno int, group_key text)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_lock_group'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._lock_config(qno int)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_lock_config'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._set_archive_seg(qno int, seg int, since timestamptz[])
RETURNS void
AS 'MODULE_PATHNAME', 'queue_set_archive_seg'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._owner_alive(pid int, started timestamptz)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_owner_alive'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._leased(id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_leased'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._lease_claimed_at(id bigint, attempt int)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'queue_lease_claimed_at'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._take_leases(qno int,
    OUT lease bigint, OUT ids bigint[], OUT attempts int[], OUT claimed_at timestamptz,
    OUT lease_until timestamptz, OUT owner_pid int, OUT owner_start timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'queue_take_leases'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._hold_leases(qno int)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_hold_leases'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._share_leases(qno int)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_share_leases'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._ended_leases(qno int)
RETURNS bigint[]
AS 'MODULE_PATHNAME', 'queue_ended_leases'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._lease_dropped(qno int, lease bigint, ids bigint[])
RETURNS void
AS 'MODULE_PATHNAME', 'queue_lease_dropped'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._write_back()
RETURNS void
AS 'MODULE_PATHNAME', 'queue_write_back'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue._held(
    OUT id bigint, OUT payload jsonb, OUT attempt int, OUT group_key text,
    OUT enqueued_at timestamptz, OUT lease_until timestamptz, OUT priority int,
    OUT run_at timestamptz, OUT dedup_key text, OUT last_error text, OUT claimed_at timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'queue_held'
LANGUAGE C VOLATILE ROWS 1;

CREATE FUNCTION queue._group_busy(qno int, group_key text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_group_busy'
LANGUAGE C VOLATILE STRICT;

-- the heads of these groups may have left: the next jobs take over
CREATE FUNCTION queue._advance_groups(qno int, group_keys text[])
RETURNS void
AS 'MODULE_PATHNAME', 'queue_advance_groups'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._free_slots(qno int, ids bigint[])
RETURNS void
AS 'MODULE_PATHNAME', 'queue_free_slots'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._count(qno int, from_state text, to_state text, n bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_count'
LANGUAGE C VOLATILE STRICT;

-- true if the new queue has its shared state, false past queue.max_queues,
-- NULL without shared_preload_libraries
CREATE FUNCTION queue._new_queue(qno int)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_new_queue'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._recount(qno int)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_recount'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._register()
RETURNS void
AS 'MODULE_PATHNAME', 'queue_register'
LANGUAGE C VOLATILE;

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

/* ==============================================================
 * Internal functions in SQL
 *
 * Helpers of the API, the statistics behind queue.stats, and upkeep
 * (one queue's pass of the background worker, or of queue.tick()).
 * ============================================================== */

-- The queue number of a job (or lease) id: ids are (sequence value *
-- 1000000 + qno), see src/base/jobid.h.  Inlined where it is used.
CREATE FUNCTION queue._qno(id bigint)
RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (id % 1000000)::int;

CREATE FUNCTION queue._check_name(queue text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF queue IS NULL THEN
        RAISE EXCEPTION 'queue name must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass the name of a queue, for example ''emails''.';
    END IF;
    IF queue !~ '^[a-z][a-z0-9_]{0,47}$' THEN
        RAISE EXCEPTION 'invalid queue name "%"', queue
            USING ERRCODE = 'invalid_name',
                  DETAIL = 'Queue names are 1 to 48 lowercase letters, digits and underscores, starting with a letter.',
                  HINT = 'Choose a name such as ''emails'' or ''sms_bulk''.';
    END IF;
END
$$;

-- The row of an existing queue, locked against concurrent alter/drop.
CREATE FUNCTION queue._get(queue text, lock boolean DEFAULT false)
RETURNS queue.queue_config
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r queue.queue_config;
BEGIN
    PERFORM queue._check_name(queue);
    IF lock THEN
        SELECT * INTO r FROM queue.queue_config c WHERE c.name = queue FOR UPDATE;
    ELSE
        SELECT * INTO r FROM queue.queue_config c WHERE c.name = queue;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'queue "%" does not exist', queue
            USING ERRCODE = 'undefined_object',
                  HINT = 'Create it with queue.create(''' || queue || '''), or list queues with SELECT * FROM queue.queues.';
    END IF;
    RETURN r;
END
$$;

-- The queue a job id belongs to (queue._qno).
CREATE FUNCTION queue._queue_of(id bigint)
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

/* How many segments each queue's archive has (see queue._rotate_archive). */
CREATE FUNCTION queue._archive_segments()
RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS 'SELECT 4';

/* The archive segment of queue qno that finished jobs go to now. */
CREATE FUNCTION queue._archive_seg(qno int)
RETURNS smallint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS 'SELECT c.archive_seg FROM queue.queue_config c WHERE c.qno = $1';

CREATE FUNCTION queue._check_options(
    max_attempts int, lease interval, backoff_base interval,
    backoff_max interval, retention interval, max_running int,
    group_retry text DEFAULT 'block', rate_limit int DEFAULT NULL,
    rate_period interval DEFAULT '1 second', group_max_running int DEFAULT 1)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF max_attempts IS NULL OR max_attempts < 1 OR max_attempts > 1000 THEN
        RAISE EXCEPTION 'max_attempts must be between 1 and 1000, not %', coalesce(max_attempts::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'max_attempts counts every claim of a job, the first included.';
    END IF;
    IF lease IS NULL OR lease <= interval '0' OR lease > interval '7 days' THEN
        RAISE EXCEPTION 'lease must be positive and at most 7 days, not %', coalesce(lease::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Long-running consumers should keep a short lease and call queue.extend() as a heartbeat.';
    END IF;
    IF backoff_base IS NULL OR backoff_base < interval '0' OR backoff_base > interval '1 year' THEN
        RAISE EXCEPTION 'backoff_base must be between 0 and 1 year'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use interval ''0'' to retry failed jobs at once.';
    END IF;
    IF backoff_max IS NULL OR backoff_max < backoff_base OR backoff_max > interval '1 year' THEN
        RAISE EXCEPTION 'backoff_max must be at least backoff_base and at most 1 year'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'backoff_max caps the exponential backoff that starts at backoff_base.';
    END IF;
    IF retention IS NULL OR retention < interval '0' THEN
        RAISE EXCEPTION 'retention must not be negative or null'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use interval ''0'' to keep no archive of finished jobs.';
    END IF;
    IF max_running < 1 OR max_running > 100000 THEN
        RAISE EXCEPTION 'max_running must be between 1 and 100000, not %', max_running
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Leave it out (or pass 0 to queue.alter) for no limit.';
    END IF;
    IF group_retry IS NULL OR group_retry NOT IN ('block', 'requeue') THEN
        RAISE EXCEPTION 'group_retry must be ''block'' or ''requeue'', not %', coalesce(group_retry, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = '''block'': a job being retried holds up its group; ''requeue'': it goes behind the rest of its group.';
    END IF;
    IF rate_limit < 1 OR rate_limit > 1000000 THEN
        RAISE EXCEPTION 'rate_limit must be between 1 and 1000000, not %', rate_limit
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'It counts the jobs claimed per rate_period; leave it out (or pass 0 to queue.alter) for no limit.';
    END IF;
    IF rate_period IS NULL OR rate_period < interval '1 millisecond' OR rate_period > interval '1 day' THEN
        RAISE EXCEPTION 'rate_period must be between 1 millisecond and 1 day, not %', coalesce(rate_period::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For 100 jobs a minute, pass rate_limit => 100, rate_period => ''1 minute''.';
    END IF;
    IF group_max_running IS NULL OR group_max_running < 1 OR group_max_running > 10000 THEN
        RAISE EXCEPTION 'group_max_running must be between 1 and 10000, not %', coalesce(group_max_running::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = '1 runs the jobs of a group one at a time, in order; n runs up to n of them at once.';
    END IF;
END
$$;

/*
 * Write every job under a batch lease of queue r as the running row a
 * claim of its own would have left, and end the leases (src/xact/leases.c).
 * No batch lease of the queue starts until this transaction ends.
 */
CREATE FUNCTION queue._settle_leases(r queue.queue_config)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    l record;
BEGIN
    FOR l IN SELECT * FROM queue._take_leases(r.qno) LOOP
        EXECUTE format($q$
            UPDATE queue.%I j SET state = 'running', attempt = j.attempt + 1, claimed_at = $2,
                   lease_until = $3, owner_pid = $4, owner_start = $5
              FROM unnest($1, $6) u(id, attempt)
             WHERE j.id = u.id AND j.attempt = u.attempt AND j.state = 'ready'$q$, 'q_' || r.name)
        USING l.ids, l.claimed_at, l.lease_until, l.owner_pid, l.owner_start, l.attempts;
    END LOOP;
END
$$;

/*
 * A new max_running: slots 1..n, with the jobs running now holding slots
 * (those beyond n get slots above n, and move into slots freed within
 * the limit: see QueueSlotsFree).
 *
 * The old slots go first: that waits for claims holding slots to commit,
 * so their jobs are seen running.  A running job gets a slot only if we
 * can lock its row.  One locked by someone else is being finished (its
 * finisher freed or will free its old slot, and it needs no new one) or
 * extended, and then runs without a slot until it ends.  The lock makes
 * whoever finishes a job we gave a slot wait for our commit, and then free
 * the new slot (QueueSlotsFree reads our settings and rows afresh).
 */
CREATE FUNCTION queue._rebuild_slots(queue text, n int)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE format('DELETE FROM queue.%I', 's_' || queue);
    IF n IS NOT NULL THEN
        EXECUTE format($q$
            INSERT INTO queue.%1$I (slot, job)
            SELECT coalesce(g, r.rn), r.id
              FROM generate_series(1, $1) g
              FULL JOIN (SELECT id, row_number() OVER (ORDER BY id) AS rn
                           FROM (SELECT id FROM queue.%2$I WHERE state = 'running'
                                   FOR SHARE SKIP LOCKED) j) r ON r.rn = g$q$,
            's_' || queue, 'q_' || queue)
        USING n;
    END IF;
END
$$;

/* Segment k of queue name's archive. */
CREATE FUNCTION queue._archive_segment(name text, k int)
RETURNS regclass
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT format('queue.%I', 'a_' || name || '$' || k)::regclass $$;

/*
 * What archive upkeep has to do for queue r at time t: the segments to
 * empty, and whether to turn to the next segment.  Segments are filled in
 * ring order, so a segment other than the current one stopped taking jobs
 * when the one after it began (archive_since); if it stopped more than
 * retention ago, every job in it is past retention.  The current segment
 * is left for the next once it has taken jobs for retention / (segments -
 * 1) and the next is empty (or about to be).
 */
CREATE FUNCTION queue._archive_due(r queue.queue_config, t timestamptz,
    OUT expired int[], OUT turn boolean)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    nseg int := queue._archive_segments();
    cur  int := r.archive_seg;
    nxt  int := (r.archive_seg + 1) % nseg;
BEGIN
    expired := ARRAY(SELECT k FROM generate_series(0, nseg - 1) k
                      WHERE k <> cur
                        AND pg_relation_size(queue._archive_segment(r.name, k)) > 0
                        AND coalesce(r.archive_since[(k + 1) % nseg + 1] < t - r.retention, true));
    turn := pg_relation_size(queue._archive_segment(r.name, cur)) > 0
            AND coalesce(t - r.archive_since[cur + 1] >= r.retention / (nseg - 1), true)
            AND (nxt = ANY (expired) OR pg_relation_size(queue._archive_segment(r.name, nxt)) = 0);
END
$$;

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

/*
 * Archive upkeep for one queue at time t (see queue._archive_due).  A
 * finished job is kept for at least retention, and is gone within
 * segments / (segments - 1) times retention (and the worker's cleanup
 * interval); with retention 0 every segment but the current one, which
 * takes no jobs then, is emptied at once.
 *
 * Who inserts into a segment holds a lock on it until commit, and a
 * backend switches segments by its next transaction after a turn commits,
 * so truncation never waits on inserters: only on readers of the archive,
 * and on them for at most lock_timeout 100 ms, after which the segment is
 * left for the next pass.  Returns the number of jobs removed: counted for
 * small segments, the planner's estimate for big ones.
 */
CREATE FUNCTION queue._rotate_archive(r queue.queue_config, t timestamptz)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    nseg    int := queue._archive_segments();
    due     record := queue._archive_due(r, t);
    k       int;
    seg     regclass;
    n       bigint;
    deleted bigint := 0;
    timeout text := current_setting('lock_timeout');
BEGIN
    IF cardinality(due.expired) = 0 AND NOT due.turn THEN
        RETURN 0;
    END IF;
    -- the row as it is now, kept from concurrent alter(), drop() and tick()
    -- (locked and changed through C: upkeep runs as the queue's owner,
    -- who may only read queue_config)
    IF NOT queue._lock_config(r.qno) THEN
        RETURN 0;
    END IF;
    SELECT * INTO r FROM queue.queue_config c WHERE c.qno = r.qno;
    due := queue._archive_due(r, t);

    FOREACH k IN ARRAY due.expired LOOP
        seg := queue._archive_segment(r.name, k);
        BEGIN
            PERFORM set_config('lock_timeout', '100ms', true);
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', seg);
            SELECT c.reltuples::bigint INTO n FROM pg_class c WHERE c.oid = seg;
            IF n < 10000 THEN
                EXECUTE format('SELECT count(*) FROM %s', seg) INTO n;
            END IF;
            EXECUTE format('TRUNCATE %s', seg);
            deleted := deleted + n;
        EXCEPTION
            WHEN lock_not_available THEN
                NULL;           -- read right now: next pass
            WHEN OTHERS THEN
                RAISE WARNING 'could not empty archive segment % of queue "%": %', seg, r.name, SQLERRM
                    USING HINT = 'Finished jobs stay in it past retention until this is fixed.';
        END;
        PERFORM set_config('lock_timeout', timeout, true);
    END LOOP;

    -- (the next segment may have been left full above)
    IF due.turn AND pg_relation_size(queue._archive_segment(r.name, (r.archive_seg + 1) % nseg)) = 0 THEN
        r.archive_seg := (r.archive_seg + 1) % nseg;
        r.archive_since[r.archive_seg + 1] := t;
        PERFORM queue._set_archive_seg(r.qno, r.archive_seg, r.archive_since);
    END IF;
    RETURN deleted;
END
$$;

/*
 * Batch leases of queue r that ran out, or whose claimer is gone
 * (src/xact/leases.c): their jobs are ready rows, returned as running ones
 * would be.  Also the rows of leases whose jobs all finished but whose
 * last finishers could not tell (two completing at once).  Returns how
 * many jobs it returned.  The worker runs this for every queue
 * after everything else in its pass, so that the lease rows and jobs it
 * locks are not held while upkeep waits for something (a group's lock,
 * say).  Not while something holds the queue's leases still; and without
 * waiting for a row: a job some transaction is finishing stays under its
 * lease (kept a second longer) until the next pass, which returns it if
 * that transaction rolled back.  (Claims take batch leases only while one
 * role owns both tables; a job table given to another role by hand leaves
 * leases from before to a superuser's tick().)
 */
CREATE FUNCTION queue._end_leases(r queue.queue_config, batch int DEFAULT 1000)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    q   text := 'q_' || r.name;
    seq text := 'q_' || r.name || '$seq';
    t   timestamptz := clock_timestamp();
    l record;
    n_lease bigint := 0;
    n_lease_dead bigint := 0;
    n bigint;
    nd bigint;
    got bigint[];
    rest bigint[];
    rest_attempts int[];
BEGIN
    -- (each privilege on its own: given a list, has_table_privilege wants any)
    IF has_table_privilege(format('queue.%I', 'l_' || r.name), 'SELECT')
       AND has_table_privilege(format('queue.%I', 'l_' || r.name), 'UPDATE')
       AND has_table_privilege(format('queue.%I', 'l_' || r.name), 'DELETE')
       AND queue._share_leases(r.qno) THEN
        FOR l IN EXECUTE format($q$
            SELECT lease, ids, attempts, claimed_at, lease_until FROM queue.%1$I
             WHERE lease_until < $2
                OR owner_pid IS NOT NULL AND NOT queue._owner_alive(owner_pid, owner_start)
                OR lease = ANY ($3)
             ORDER BY lease_until LIMIT $1 FOR UPDATE SKIP LOCKED$q$, 'l_' || r.name)
            USING batch, t, queue._ended_leases(r.qno)
        LOOP
            EXECUTE format($q$
                WITH j AS (SELECT q.id FROM queue.%1$I q, unnest($1, $6) u(id, attempt)
                            WHERE q.id = u.id AND q.attempt = u.attempt AND q.state = 'ready'
                              FOR UPDATE OF q SKIP LOCKED),
                u AS (
                UPDATE queue.%1$I q
                   SET state = CASE WHEN q.attempt + 1 - q.uncounted >= $2 THEN 'dead' ELSE 'ready' END::queue.job_state,
                       attempt = q.attempt + 1,
                       rank = nextval('queue.%2$I'),
                       run_at = greatest(q.run_at, $3),
                       claimed_at = $4, lease_until = NULL, owner_pid = NULL, owner_start = NULL,
                       last_error = CASE WHEN $5 < $3 THEN 'lease expired' ELSE 'consumer disconnected' END,
                       history = coalesce(q.history, '[]') || jsonb_build_object(
                           'event', CASE WHEN $5 < $3 THEN 'lease expired' ELSE 'consumer disconnected' END,
                           'at', $3, 'attempt', q.attempt + 1, 'claimed_at', $4)
                  FROM j WHERE q.id = j.id
                 RETURNING q.id, q.state)
                SELECT count(*), count(*) FILTER (WHERE state = 'dead'), coalesce(array_agg(id), '{}') FROM u$q$, q, seq)
            INTO n, nd, got USING l.ids, r.max_attempts, t, l.claimed_at, l.lease_until, l.attempts;
            -- what it could not lock: jobs still at the lease's attempt
            EXECUTE format($q$SELECT coalesce(array_agg(u.id), '{}'), coalesce(array_agg(u.attempt), '{}')
                                FROM queue.%I q, unnest($1, $2) u(id, attempt)
                               WHERE q.id = u.id AND q.attempt = u.attempt AND q.state = 'ready'
                                 AND u.id <> ALL ($3)$q$, q)
            INTO rest, rest_attempts USING l.ids, l.attempts, got;
            IF cardinality(rest) = 0 THEN
                EXECUTE format('DELETE FROM queue.%I WHERE lease = $1', 'l_' || r.name) USING l.lease;
            ELSE
                EXECUTE format('UPDATE queue.%I SET ids = $2, attempts = $3, lease_until = greatest(lease_until, $4)'
                               ' WHERE lease = $1', 'l_' || r.name)
                USING l.lease, rest, rest_attempts, t + interval '1 second';
            END IF;
            PERFORM queue._lease_dropped(r.qno, l.lease,
                ARRAY(SELECT i FROM unnest(l.ids) i WHERE i <> ALL (rest)));
            n_lease := n_lease + n;
            n_lease_dead := n_lease_dead + nd;
        END LOOP;
        PERFORM queue._count(r.qno, 'running', 'dead', n_lease_dead);
        PERFORM queue._count(r.qno, 'running', 'ready', n_lease - n_lease_dead);
        IF n_lease > 0 THEN
            PERFORM queue._reset_cursor(r.qno);
        END IF;
    END IF;
    RETURN n_lease;
END
$$;

/*
 * One pass of upkeep for one queue: returns jobs whose lease ran out or
 * whose claiming session is gone (orphans), makes due scheduled jobs
 * ready, and with cleanup empties archive segments past retention
 * (queue._rotate_archive).  Batch leases are queue._end_leases's, run
 * after every queue's tick.  Batches are bounded so that a pass never
 * holds many row locks or runs long; callers loop while work remains.
 * next_due is when something falls due next (a scheduled job or a
 * lease), for the worker's sleep.
 *
 * A claim is an orphan when it was committed by a session that no longer
 * exists: pid and backend start time together identify a session, since
 * pids are reused (queue._owner_alive, src/shmem/owners.c).  Behind a connection
 * pooler the server session lives on, and the lease remains the guarantee.
 */
CREATE FUNCTION queue._tick_queue(r queue.queue_config, batch int DEFAULT 1000,
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

/* ==============================================================
 * API
 *
 * The functions users call (README.md, "SQL reference").
 * ============================================================== */

CREATE FUNCTION queue.enqueue(
    queue     text,
    payload   jsonb,
    run_at    timestamptz DEFAULT NULL,
    delay     interval DEFAULT NULL,
    priority  int DEFAULT 0,
    group_key text DEFAULT NULL,
    dedup_key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'queue_enqueue'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.enqueue_batch(
    queue     text,
    payloads  jsonb[],
    run_at    timestamptz DEFAULT NULL,
    delay     interval DEFAULT NULL,
    priority  int DEFAULT 0,
    group_key text DEFAULT NULL)
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'queue_enqueue_batch'
LANGUAGE C VOLATILE ROWS 100;

CREATE FUNCTION queue.claim(
    queue    text,
    max_jobs int DEFAULT 1,
    lease    interval DEFAULT NULL,
    wait     interval DEFAULT NULL)
RETURNS SETOF queue.claimed
AS 'MODULE_PATHNAME', 'queue_claim'
LANGUAGE C VOLATILE ROWS 10;

CREATE FUNCTION queue.complete(id bigint, attempt int DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_complete'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.complete(ids bigint[])
RETURNS bigint
AS 'MODULE_PATHNAME', 'queue_complete_many'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.fail(
    id       bigint,
    error    text,
    retry_in interval DEFAULT NULL,
    attempt  int DEFAULT NULL)
RETURNS text
AS 'MODULE_PATHNAME', 'queue_fail'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.extend(id bigint, lease interval, attempt int DEFAULT NULL)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'queue_extend'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.release(id bigint, run_at timestamptz DEFAULT NULL, attempt int DEFAULT NULL)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_release'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue._create(
    queue         text,
    max_attempts  int DEFAULT 5,
    lease         interval DEFAULT '30 seconds',
    backoff_base  interval DEFAULT '1 second',
    backoff_max   interval DEFAULT '1 hour',
    retention     interval DEFAULT '1 day',
    if_not_exists boolean DEFAULT false,
    max_running   int DEFAULT NULL,
    group_retry   text DEFAULT 'block',
    rate_limit    int DEFAULT NULL,
    rate_period   interval DEFAULT '1 second',
    group_max_running int DEFAULT 1)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n  int;
    s  int;
    q  text := 'q_' || queue;
    a  text := 'a_' || queue;
BEGIN
    PERFORM queue._check_name(queue);
    IF if_not_exists IS NULL THEN
        RAISE EXCEPTION 'if_not_exists must not be null'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass true or false.';
    END IF;
    PERFORM queue._check_options(max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry,
                                 rate_limit, rate_period, group_max_running);

    -- Serialize creators of the same name; the unique index would too, but
    -- only after the tables were made.
    PERFORM pg_advisory_xact_lock(hashtext('queue.create'), hashtext(queue));
    IF EXISTS (SELECT 1 FROM queue.queue_config c WHERE c.name = queue) THEN
        IF if_not_exists THEN
            RAISE NOTICE 'queue "%" already exists, skipping', queue;
            RETURN;
        END IF;
        RAISE EXCEPTION 'queue "%" already exists', queue
            USING ERRCODE = 'duplicate_object',
                  HINT = 'Pass if_not_exists => true to make this a no-op, or queue.alter() to change its options.';
    END IF;

    -- Derived names use '$', which queue names cannot contain, so that no
    -- queue's objects can collide with another's.
    n := nextval('queue.queue_number_seq');
    INSERT INTO queue.queue_config (qno, name, max_attempts, lease, backoff_base, backoff_max, retention,
                                    max_running, group_retry, archive_since, rate_limit, rate_period,
                                    group_max_running)
    VALUES (n, queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry,
            now() || array_fill(NULL::timestamptz, ARRAY[queue._archive_segments() - 1]),
            rate_limit, rate_period, group_max_running);

    EXECUTE format('CREATE SEQUENCE queue.%I', q || '$seq');
    -- The CHECK on id keeps a row from posing as another queue's job
    -- (ids name their queue: src/base/jobid.h) to whoever may insert into
    -- or update the table.  The C code writes ids from the sequence and
    -- skips it (src/storage/direct.c).
    -- toast_tuple_target at its maximum, as in the archive: a row of up to
    -- about 8 kB stays whole and is not compressed, instead of its payload
    -- being split into TOAST chunks that enqueue inserts, every claim
    -- fetches, and completion deletes (docs/design.md, "Big values").
    -- vacuum_truncate off: vacuum would give back the empty pages at the
    -- end of a drained table under an ACCESS EXCLUSIVE lock, stalling every
    -- claim and enqueue meanwhile (and queries on standbys, which replay
    -- the lock), only for the next backlog to extend the file again.
    EXECUTE format('CREATE TABLE queue.%I (CONSTRAINT %I CHECK ((id %% 1000000) = %s)) INHERITS (queue._job)'
                   ' WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.05,'
                   ' vacuum_truncate = false, toast_tuple_target = %s)',
                   q, q || '$id', n, current_setting('block_size')::int - 32);
    EXECUTE format('ALTER TABLE queue.%I ADD CONSTRAINT %I PRIMARY KEY (id)', q, q || '$pkey');
    -- so that dropping the table (or the extension, with CASCADE) drops it
    EXECUTE format('ALTER SEQUENCE queue.%I OWNED BY queue.%I.id', q || '$seq', q);
    EXECUTE format('CREATE INDEX %I ON queue.%I (priority DESC, rank) WHERE state = ''ready''', q || '$ready', q);
    EXECUTE format('CREATE INDEX %I ON queue.%I (run_at) WHERE state = ''scheduled''', q || '$scheduled', q);
    EXECUTE format('CREATE INDEX %I ON queue.%I (lease_until) WHERE state = ''running''', q || '$running', q);
    EXECUTE format('CREATE UNIQUE INDEX %I ON queue.%I (dedup_key) WHERE dedup_key IS NOT NULL AND state <> ''dead''', q || '$dedup', q);
    EXECUTE format('CREATE INDEX %I ON queue.%I (group_key, rank) WHERE group_key IS NOT NULL AND state <> ''dead''', q || '$group', q);
    -- a group's active jobs: its head (up to group_max_running of them)
    EXECUTE format('CREATE INDEX %I ON queue.%I (group_key) WHERE group_key IS NOT NULL AND state IN (''ready'', ''scheduled'', ''running'')', q || '$head', q);
    EXECUTE format('CREATE TABLE queue.%I (CONSTRAINT %I PRIMARY KEY (slot)) INHERITS (queue._slot)',
                   's_' || queue, 's_' || queue || '$pkey');
    EXECUTE format('CREATE INDEX %I ON queue.%I (job)', 's_' || queue || '$job', 's_' || queue);
    PERFORM queue._rebuild_slots(queue, max_running);
    EXECUTE format('CREATE TABLE queue.%I (CONSTRAINT %I PRIMARY KEY (lease)) INHERITS (queue._lease)'
                   ' WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.05,'
                   ' vacuum_truncate = false)',
                   'l_' || queue, 'l_' || queue || '$pkey');
    EXECUTE format('CREATE INDEX %I ON queue.%I (lease_until)', 'l_' || queue || '$until', 'l_' || queue);
    -- Partitioned: what users add to it (indexes on payload fields,
    -- columns, triggers) applies to every segment.  Rows inserted without
    -- a segment go to the current one.
    EXECUTE format('CREATE TABLE queue.%I PARTITION OF queue._archive FOR VALUES IN (%s)'
                   ' PARTITION BY LIST (seg)', a, n);
    EXECUTE format('ALTER TABLE queue.%I ALTER seg SET DEFAULT queue._archive_seg(%s)', a, n);
    -- Archive rows are written once and never updated, and a value that
    -- reaches them uncompressed is small or did not compress at enqueue:
    -- rows of up to a page stay whole, instead of being compressed again
    -- in vain and split into TOAST chunks.
    FOR s IN 0 .. queue._archive_segments() - 1 LOOP
        EXECUTE format('CREATE TABLE queue.%I PARTITION OF queue.%I FOR VALUES IN (%s)'
                       ' WITH (toast_tuple_target = %s)',
                       a || '$' || s, a, s, current_setting('block_size')::int - 32);
    END LOOP;
    -- A btree, not BRIN: ranges added since the last vacuum have no
    -- summary, so a BRIN lookup would read every page added since.  ids
    -- mostly grow with insertion, so inserts stay near the right edge.
    EXECUTE format('CREATE INDEX %I ON queue.%I (id)', a || '$id', a);

    PERFORM queue._reset_cursor(n);
    IF NOT queue._new_queue(n) THEN
        RAISE WARNING 'queue "%" runs without shared state: queue.max_queues (%) queues have it already',
                      queue, current_setting('queue.max_queues')
            USING DETAIL = 'It works, but more slowly: claims start at the front of its ready index, '
                           'claims of several jobs take no batch lease, and the worker visits it on every pass.',
                  HINT = 'Raise queue.max_queues (it takes a restart) or drop unused queues; '
                         'queue.stats.shared_state shows which queues have it.';
    END IF;
END
$$;

CREATE FUNCTION queue._alter(
    queue        text,
    max_attempts int DEFAULT NULL,
    lease        interval DEFAULT NULL,
    backoff_base interval DEFAULT NULL,
    backoff_max  interval DEFAULT NULL,
    retention    interval DEFAULT NULL,
    max_running  int DEFAULT NULL,
    group_retry  text DEFAULT NULL,
    rate_limit   int DEFAULT NULL,
    rate_period  interval DEFAULT NULL,
    group_max_running int DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r queue.queue_config := queue._get(queue, true);
    old_group_max int := r.group_max_running;
    waiting_groups text[];
BEGIN
    r.max_attempts := coalesce(max_attempts, r.max_attempts);
    r.lease        := coalesce(lease, r.lease);
    r.backoff_base := coalesce(backoff_base, r.backoff_base);
    r.backoff_max  := coalesce(backoff_max, r.backoff_max);
    r.retention    := coalesce(retention, r.retention);
    -- 0 removes the limit
    r.max_running  := CASE WHEN max_running = 0 THEN NULL ELSE coalesce(max_running, r.max_running) END;
    r.group_retry  := coalesce(group_retry, r.group_retry);
    r.rate_limit   := CASE WHEN rate_limit = 0 THEN NULL ELSE coalesce(rate_limit, r.rate_limit) END;
    r.rate_period  := coalesce(rate_period, r.rate_period);
    r.group_max_running := coalesce(group_max_running, r.group_max_running);
    PERFORM queue._check_options(r.max_attempts, r.lease, r.backoff_base, r.backoff_max, r.retention,
                                 r.max_running, r.group_retry, r.rate_limit, r.rate_period,
                                 r.group_max_running);
    UPDATE queue.queue_config c
       SET max_attempts = r.max_attempts, lease = r.lease, backoff_base = r.backoff_base,
           backoff_max = r.backoff_max, retention = r.retention, max_running = r.max_running,
           group_retry = r.group_retry, rate_limit = r.rate_limit, rate_period = r.rate_period,
           group_max_running = r.group_max_running
     WHERE c.qno = r.qno;
    -- more may run at once now: the groups' next jobs move up (a lower
    -- limit lets the jobs beyond it finish)
    IF r.group_max_running > old_group_max THEN
        EXECUTE format('SELECT array_agg(DISTINCT group_key) FROM queue.%I WHERE state = ''waiting''', 'q_' || queue)
           INTO waiting_groups;
        PERFORM queue._advance_groups(r.qno, coalesce(waiting_groups, '{}'));
    END IF;
    IF max_running IS NOT NULL THEN
        -- jobs under batch leases hold slots too: as running rows
        PERFORM queue._settle_leases(r);
        PERFORM queue._rebuild_slots(queue, r.max_running);
    END IF;
END
$$;

CREATE FUNCTION queue._drop(queue text, if_exists boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r queue.queue_config;
BEGIN
    PERFORM queue._check_name(queue);
    SELECT * INTO r FROM queue.queue_config c WHERE c.name = queue FOR UPDATE;
    IF NOT FOUND THEN
        IF if_exists THEN
            RAISE NOTICE 'queue "%" does not exist, skipping', queue;
            RETURN;
        END IF;
        PERFORM queue._get(queue);
    END IF;
    -- (while the queue still exists: its shared state goes at commit)
    PERFORM queue._reset_cursor(r.qno, true);
    -- IF EXISTS: DROP OWNED ... CASCADE may have dropped some or all of them
    EXECUTE format('DROP TABLE IF EXISTS queue.%I, queue.%I, queue.%I, queue.%I',
                   'q_' || queue, 'a_' || queue, 's_' || queue, 'l_' || queue);
    DELETE FROM queue.queue_config c WHERE c.qno = r.qno;
END
$$;

/*
 * Hand a queue's tables (its jobs, slots, leases and archive, with the sequence
 * and every archive segment) to another role.  Upkeep runs as the owner
 * of the queue's tables, so the worker then works with that role's rights
 * instead of a superuser's; the role needs nothing more.
 */
CREATE FUNCTION queue._set_owner(queue text, owner regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r queue.queue_config := queue._get(queue, true);
BEGIN
    IF owner IS NULL THEN
        RAISE EXCEPTION 'owner must not be null'
            USING ERRCODE = 'null_value_not_allowed',
                  HINT = 'Pass the role that is to own the queue''s tables.';
    END IF;
    EXECUTE format('ALTER TABLE queue.%I OWNER TO %s', 'q_' || r.name, owner);
    EXECUTE format('ALTER TABLE queue.%I OWNER TO %s', 's_' || r.name, owner);
    EXECUTE format('ALTER TABLE queue.%I OWNER TO %s', 'l_' || r.name, owner);
    EXECUTE format('ALTER TABLE queue.%I OWNER TO %s', 'a_' || r.name, owner);
    FOR k IN 0 .. queue._archive_segments() - 1 LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO %s', queue._archive_segment(r.name, k), owner);
    END LOOP;
END
$$;

CREATE FUNCTION queue._pause(queue text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r queue.queue_config := queue._get(queue, true);
BEGIN
    UPDATE queue.queue_config c SET paused = true WHERE c.qno = r.qno;
END
$$;

CREATE FUNCTION queue._resume(queue text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r queue.queue_config := queue._get(queue, true);
BEGIN
    UPDATE queue.queue_config c SET paused = false WHERE c.qno = r.qno;
    PERFORM queue._reset_cursor(r.qno);
END
$$;

CREATE FUNCTION queue._history(id bigint)
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

CREATE FUNCTION queue._reschedule(id bigint, run_at timestamptz, priority int DEFAULT NULL)
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

CREATE FUNCTION queue._cancel(id bigint)
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

/*
 * A dead job gets a fresh set of attempts: the ones it had no longer
 * count toward max_attempts (uncounted), but its attempt number goes on
 * from where it was, as every claim's does, so that no token handed out
 * before, and no batch lease that listed it, can match it again.
 */
CREATE FUNCTION queue._retry(id bigint)
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

CREATE FUNCTION queue._purge(queue text, filter jsonb DEFAULT NULL)
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

CREATE FUNCTION queue.tick()
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

/*
 * The API functions written in PL/pgSQL above run through these: each
 * checks the caller's privilege on the queue and calls queue._<name> as
 * the role the work needs (src/ops/front.c).
 */
CREATE FUNCTION queue.create(
    queue         text,
    max_attempts  int DEFAULT 5,
    lease         interval DEFAULT '30 seconds',
    backoff_base  interval DEFAULT '1 second',
    backoff_max   interval DEFAULT '1 hour',
    retention     interval DEFAULT '1 day',
    if_not_exists boolean DEFAULT false,
    max_running   int DEFAULT NULL,
    group_retry   text DEFAULT 'block',
    rate_limit    int DEFAULT NULL,
    rate_period   interval DEFAULT '1 second',
    group_max_running int DEFAULT 1)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_create'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.alter(
    queue        text,
    max_attempts int DEFAULT NULL,
    lease        interval DEFAULT NULL,
    backoff_base interval DEFAULT NULL,
    backoff_max  interval DEFAULT NULL,
    retention    interval DEFAULT NULL,
    max_running  int DEFAULT NULL,
    group_retry  text DEFAULT NULL,
    rate_limit   int DEFAULT NULL,
    rate_period  interval DEFAULT NULL,
    group_max_running int DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_alter'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.drop(queue text, if_exists boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_drop'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.set_owner(queue text, owner regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_set_owner'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.pause(queue text)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_pause'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.resume(queue text)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_resume'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.history(id bigint)
RETURNS TABLE (at timestamptz, event text, attempt int, detail text)
AS 'MODULE_PATHNAME', 'queue_history'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.reschedule(id bigint, run_at timestamptz, priority int DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_reschedule'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.cancel(id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_cancel'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.retry(id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_retry'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.purge(queue text, filter jsonb DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'queue_purge'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.grant(queue text, role regrole, privilege text)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_grant'
LANGUAGE C VOLATILE;

CREATE FUNCTION queue.revoke(queue text, role regrole, privilege text)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_revoke'
LANGUAGE C VOLATILE;

/* ==============================================================
 * Views
 *
 * Each shows the rows of the queues the user may see (queue._may):
 * security barriers, so that no condition of a query on them runs on
 * another queue's rows first.
 * ============================================================== */

CREATE VIEW queue.queues WITH (security_barrier) AS
SELECT c.name AS queue, c.max_attempts, c.lease, c.backoff_base, c.backoff_max,
       c.retention, c.paused, c.created_at, c.max_running, c.group_retry, c.rate_limit, c.rate_period,
       c.group_max_running
  FROM queue.queue_config c
 WHERE queue._may(c.qno, 'any');

-- queue.jobs is a UNION ALL of these two, each with a security barrier of
-- its own: the planner flattens a UNION ALL, and a condition on queue.jobs
-- would then reach the rows of each branch before the branch's filter.
CREATE VIEW queue._job_rows WITH (security_barrier) AS
SELECT c.name AS queue, j.id, j.state, j.payload, j.priority, j.run_at, j.attempt, c.max_attempts,
       j.group_key, j.dedup_key, j.enqueued_at, j.claimed_at, j.lease_until, j.last_error
  FROM queue.queue_config c, LATERAL queue._queue_jobs(c.qno) j
 WHERE queue._may(c.qno, 'read');

-- jobs the current transaction claimed: running, to it (src/xact/held.c)
CREATE VIEW queue._held_rows WITH (security_barrier) AS
SELECT c.name AS queue, h.id, 'running'::text AS state, h.payload, h.priority, h.run_at, h.attempt,
       c.max_attempts, h.group_key, h.dedup_key, h.enqueued_at, h.claimed_at,
       h.lease_until, h.last_error
  FROM queue._held() h
  JOIN queue.queue_config c ON c.qno = queue._qno(h.id)
 WHERE queue._may(c.qno, 'read');

CREATE VIEW queue.jobs AS
SELECT * FROM queue._job_rows
UNION ALL
SELECT * FROM queue._held_rows;

CREATE VIEW queue.archive WITH (security_barrier) AS
SELECT c.name AS queue, a.id, a.state, a.payload, a.priority, a.run_at,
       a.attempt, a.group_key, a.dedup_key, a.enqueued_at, a.claimed_at,
       a.finished_at, a.last_error
  FROM queue.queue_config c, LATERAL queue._queue_archive(c.qno) a
 WHERE queue._may(c.qno, 'read');

CREATE VIEW queue.stats WITH (security_barrier) AS
SELECT c.name AS queue, s.ready, s.scheduled, s.running, s.dead,
       s.oldest_ready_age, s.completed_last_minute, s.failed_last_minute, s.waiting,
       s.shared_state
  FROM queue.queue_config c, LATERAL queue._queue_stats(c.qno) s
 WHERE queue._may(c.qno, 'read');

-- The grants on the queues the user owns, and those to roles whose
-- privileges it has.
CREATE VIEW queue.grants WITH (security_barrier) AS
SELECT c.name AS queue, g.grantee AS role, g.privilege
  FROM queue.queue_grants g
  JOIN queue.queue_config c ON c.qno = g.qno
 WHERE queue._owns(c.name) OR pg_catalog.pg_has_role(g.grantee, 'USAGE');

/* ==============================================================
 * Grants and registration
 * ============================================================== */

GRANT USAGE ON SCHEMA queue TO PUBLIC;

-- Have the background worker serve this database (or say there is none).
SELECT queue._register();

-- queue_config has row security: a queue's owner sees its row.
GRANT SELECT, UPDATE (max_attempts, lease, backoff_base, backoff_max, retention, max_running,
                      group_retry, paused, rate_limit, rate_period, group_max_running)
      ON queue.queue_config TO PUBLIC;
GRANT SELECT ON queue.queues, queue.jobs, queue.archive, queue.stats, queue.grants TO PUBLIC;

-- Creating queues is for superusers and the roles they grant this to.
REVOKE EXECUTE ON FUNCTION queue.create FROM PUBLIC;

-- Called only by the API functions of the same name without _ (src/ops/front.c).
REVOKE EXECUTE ON FUNCTION queue._create, queue._alter, queue._drop, queue._set_owner, queue._pause,
    queue._resume, queue._history, queue._reschedule, queue._cancel, queue._retry, queue._purge
    FROM PUBLIC;

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
