/* queue--0.3--0.4.sql: upgrade from 0.3 to 0.4 (privileges per queue: queue.grant) */

\echo Use "ALTER EXTENSION queue UPDATE TO '0.4'" to load this file. \quit

-- A queue's owner may update its row (queue.alter runs as the owner):
-- what queue._check_options allows, the table holds to as well.
ALTER TABLE queue.queue_config ADD CONSTRAINT queue_config_options CHECK (
    max_attempts BETWEEN 1 AND 1000
    AND lease > interval '0' AND lease <= interval '7 days'
    AND backoff_base >= interval '0' AND backoff_base <= interval '1 year'
    AND backoff_max >= backoff_base AND backoff_max <= interval '1 year'
    AND retention >= interval '0'
    AND (max_running IS NULL OR max_running BETWEEN 1 AND 100000));

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

-- Counts are stored by queue._table_stats now, for roles that may read
-- a queue (queue._set_counts was for its writers).
DROP FUNCTION queue._set_counts(int, bigint, bigint, bigint, bigint, bigint, bigint);
DROP FUNCTION queue._table_stats(int, boolean);

CREATE FUNCTION queue._table_stats(qno int, with_counts boolean, gen bigint,
    OUT ready bigint, OUT scheduled bigint, OUT running bigint, OUT dead bigint,
    OUT waiting bigint, OUT oldest_ready_age interval)
AS 'MODULE_PATHNAME', 'queue_table_stats'
LANGUAGE C VOLATILE STRICT;

-- For a role that may read the queue (the functions it calls check): the
-- table itself is read by queue._table_stats as its owner.
CREATE OR REPLACE FUNCTION queue._stats(r queue.queue_config,
    OUT ready bigint, OUT scheduled bigint, OUT running bigint, OUT dead bigint,
    OUT waiting bigint, OUT oldest_ready_age interval,
    OUT completed_last_minute bigint, OUT failed_last_minute bigint)
LANGUAGE plpgsql VOLATILE
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
    t := queue._table_stats(r.qno, NOT c.valid, c.gen);
    oldest_ready_age := t.oldest_ready_age;
    IF c.valid THEN
        ready := c.ready; scheduled := c.scheduled; running := c.running;
        dead := c.dead; waiting := c.waiting;
    ELSIF t.ready IS NOT NULL THEN
        ready := t.ready; scheduled := t.scheduled; running := t.running;
        dead := t.dead; waiting := t.waiting;
    END IF;
    -- jobs this transaction claimed and holds (src/xact/held.c)
    running := running + (SELECT count(*) FROM queue._held() h WHERE queue._qno(h.id) = r.qno);

    SELECT rc.completed, rc.failed INTO completed_last_minute, failed_last_minute
      FROM queue._recent_counts(r.qno) rc;
END
$$;

-- The API functions in PL/pgSQL become internal ones, and C functions
-- that check privileges call them (src/ops/front.c).

CREATE FUNCTION queue._create(
    queue         text,
    max_attempts  int DEFAULT 5,
    lease         interval DEFAULT '30 seconds',
    backoff_base  interval DEFAULT '1 second',
    backoff_max   interval DEFAULT '1 hour',
    retention     interval DEFAULT '1 day',
    if_not_exists boolean DEFAULT false,
    max_running   int DEFAULT NULL,
    group_retry   text DEFAULT 'block')
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
    PERFORM queue._check_options(max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry);

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
                                    max_running, group_retry, archive_since)
    VALUES (n, queue, max_attempts, lease, backoff_base, backoff_max, retention, max_running, group_retry,
            now() || array_fill(NULL::timestamptz, ARRAY[queue._archive_segments() - 1]));

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
    -- at most one row per group: its head
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
    group_retry  text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r queue.queue_config := queue._get(queue, true);
BEGIN
    r.max_attempts := coalesce(max_attempts, r.max_attempts);
    r.lease        := coalesce(lease, r.lease);
    r.backoff_base := coalesce(backoff_base, r.backoff_base);
    r.backoff_max  := coalesce(backoff_max, r.backoff_max);
    r.retention    := coalesce(retention, r.retention);
    -- 0 removes the limit
    r.max_running  := CASE WHEN max_running = 0 THEN NULL ELSE coalesce(max_running, r.max_running) END;
    r.group_retry  := coalesce(group_retry, r.group_retry);
    PERFORM queue._check_options(r.max_attempts, r.lease, r.backoff_base, r.backoff_max, r.retention,
                                 r.max_running, r.group_retry);
    UPDATE queue.queue_config c
       SET max_attempts = r.max_attempts, lease = r.lease, backoff_base = r.backoff_base,
           backoff_max = r.backoff_max, retention = r.retention, max_running = r.max_running,
           group_retry = r.group_retry
     WHERE c.qno = r.qno;
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

/*
 * The API functions written in PL/pgSQL above run through these: each
 * checks the caller's privilege on the queue and calls queue._<name> as
 * the role the work needs (src/ops/front.c).
 */
CREATE OR REPLACE FUNCTION queue.create(
    queue         text,
    max_attempts  int DEFAULT 5,
    lease         interval DEFAULT '30 seconds',
    backoff_base  interval DEFAULT '1 second',
    backoff_max   interval DEFAULT '1 hour',
    retention     interval DEFAULT '1 day',
    if_not_exists boolean DEFAULT false,
    max_running   int DEFAULT NULL,
    group_retry   text DEFAULT 'block')
RETURNS void
AS 'MODULE_PATHNAME', 'queue_create'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION queue.alter(
    queue        text,
    max_attempts int DEFAULT NULL,
    lease        interval DEFAULT NULL,
    backoff_base interval DEFAULT NULL,
    backoff_max  interval DEFAULT NULL,
    retention    interval DEFAULT NULL,
    max_running  int DEFAULT NULL,
    group_retry  text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_alter'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION queue.drop(queue text, if_exists boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_drop'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION queue.set_owner(queue text, owner regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_set_owner'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION queue.pause(queue text)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_pause'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION queue.resume(queue text)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_resume'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION queue.history(id bigint)
RETURNS TABLE (at timestamptz, event text, attempt int, detail text)
AS 'MODULE_PATHNAME', 'queue_history'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION queue.reschedule(id bigint, run_at timestamptz, priority int DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_reschedule'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION queue.cancel(id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_cancel'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION queue.retry(id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'queue_retry'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION queue.purge(queue text, filter jsonb DEFAULT NULL)
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

-- The views show the queues the user may see.

CREATE OR REPLACE VIEW queue.queues WITH (security_barrier) AS
SELECT c.name AS queue, c.max_attempts, c.lease, c.backoff_base, c.backoff_max,
       c.retention, c.paused, c.created_at, c.max_running, c.group_retry
  FROM queue.queue_config c
 WHERE queue._may(c.qno, 'any');

-- queue.jobs is a UNION ALL of these two, each with a security barrier of
-- its own: the planner flattens a UNION ALL, and a condition on queue.jobs
-- would then reach the rows of each branch before the branch's filter.
CREATE VIEW queue._job_rows WITH (security_barrier) AS
SELECT c.name AS queue,
       j.id,
       CASE WHEN l.id IS NULL THEN j.state::text ELSE 'running' END AS state,
       j.payload, j.priority, j.run_at, j.attempt + (l.id IS NOT NULL)::int AS attempt, c.max_attempts,
       j.group_key, j.dedup_key, j.enqueued_at,
       CASE WHEN l.id IS NULL THEN j.claimed_at ELSE l.claimed_at END AS claimed_at,
       CASE WHEN l.id IS NULL THEN j.lease_until ELSE l.lease_until END AS lease_until,
       j.last_error
  -- a row counts only in its queue's own tables: their owner could drop
  -- the CHECK on ids, or write a lease naming another queue's jobs
  FROM queue._job j
  JOIN (SELECT c.*, pg_catalog.to_regclass(pg_catalog.format('queue.%I', 'q_' || c.name)) AS job_table,
               pg_catalog.to_regclass(pg_catalog.format('queue.%I', 'l_' || c.name)) AS lease_table
          FROM queue.queue_config c) c
    ON c.qno = queue._qno(j.id) AND j.tableoid = c.job_table
  -- jobs under a batch lease: ready rows at the attempt a lease lists (src/xact/leases.c)
  LEFT JOIN (SELECT b.tableoid AS lease_table, u.id, u.attempt, b.claimed_at, b.lease_until
               FROM queue._lease b, unnest(b.ids, b.attempts) AS u(id, attempt)) l
         ON l.id = j.id AND l.attempt = j.attempt AND j.state = 'ready' AND l.lease_table = c.lease_table
 WHERE queue._may(c.qno, 'read');

-- jobs the current transaction claimed: running, to it (src/xact/held.c)
CREATE VIEW queue._held_rows WITH (security_barrier) AS
SELECT c.name AS queue, h.id, 'running'::text AS state, h.payload, h.priority, h.run_at, h.attempt,
       c.max_attempts, h.group_key, h.dedup_key, h.enqueued_at, h.claimed_at,
       h.lease_until, h.last_error
  FROM queue._held() h
  JOIN queue.queue_config c ON c.qno = queue._qno(h.id)
 WHERE queue._may(c.qno, 'read');

CREATE OR REPLACE VIEW queue.jobs AS
SELECT * FROM queue._job_rows
UNION ALL
SELECT * FROM queue._held_rows;

CREATE OR REPLACE VIEW queue.archive WITH (security_barrier) AS
SELECT c.name AS queue, a.id, a.state, a.payload, a.priority, a.run_at,
       a.attempt, a.group_key, a.dedup_key, a.enqueued_at, a.claimed_at,
       a.finished_at, a.last_error
  FROM queue._archive a
  JOIN queue.queue_config c ON c.qno = queue._qno(a.id)
 WHERE queue._may(c.qno, 'read');

CREATE OR REPLACE VIEW queue.stats WITH (security_barrier) AS
SELECT c.name AS queue, s.ready, s.scheduled, s.running, s.dead,
       s.oldest_ready_age, s.completed_last_minute, s.failed_last_minute, s.waiting,
       queue._shared_state(c.qno) AS shared_state
  FROM queue.queue_config c, LATERAL queue._stats(c) s
 WHERE queue._may(c.qno, 'read');

-- The grants on the queues the user owns, and those to roles whose
-- privileges it has.
CREATE VIEW queue.grants WITH (security_barrier) AS
SELECT c.name AS queue, g.grantee AS role, g.privilege
  FROM queue.queue_grants g
  JOIN queue.queue_config c ON c.qno = g.qno
 WHERE queue._owns(c.name) OR pg_catalog.pg_has_role(g.grantee, 'USAGE');

-- queue_config has row security: a queue's owner sees its row.
GRANT SELECT, UPDATE (max_attempts, lease, backoff_base, backoff_max, retention, max_running,
                      group_retry, paused) ON queue.queue_config TO PUBLIC;
GRANT SELECT ON queue.queues, queue.jobs, queue.archive, queue.stats, queue.grants TO PUBLIC;

-- Creating queues is for superusers and the roles they grant this to.
REVOKE EXECUTE ON FUNCTION queue.create FROM PUBLIC;

-- Called only by the API functions of the same name without _ (src/ops/front.c).
REVOKE EXECUTE ON FUNCTION queue._create, queue._alter, queue._drop, queue._set_owner, queue._pause,
    queue._resume, queue._history, queue._reschedule, queue._cancel, queue._retry, queue._purge
    FROM PUBLIC;


/*
 * Roles that used a queue with privileges on its table (the README of
 * 0.3 said to grant them) get the queue's privileges instead: INSERT
 * gives produce, UPDATE consume, SELECT read.  Their privileges on the
 * table stay until revoked; the API needs them no more.
 */
INSERT INTO queue.queue_grants (qno, grantee, privilege)
SELECT c.qno, a.grantee::regrole, m.privilege
  FROM queue.queue_config c
  JOIN pg_catalog.pg_class t ON t.relname = 'q_' || c.name AND t.relnamespace = 'queue'::regnamespace
 CROSS JOIN LATERAL pg_catalog.aclexplode(t.relacl) a
  JOIN (VALUES ('INSERT', 'produce'), ('UPDATE', 'consume'), ('SELECT', 'read')) m(acl, privilege)
    ON m.acl = a.privilege_type
 WHERE a.grantee <> 0 AND a.grantee <> t.relowner
ON CONFLICT DO NOTHING;
