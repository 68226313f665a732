/* queue--0.6--0.7.sql: upgrade from 0.6 to 0.7 (flow control: a rate
 * limit per queue, and up to group_max_running jobs of a group at once) */

\echo Use "ALTER EXTENSION queue UPDATE TO '0.7'" to load this file. \quit

-- at most rate_limit claims per rate_period (src/shmem/ratelimit.c);
-- rate_period is filled in by hand rather than by ADD COLUMN's default,
-- which would leave the table with a "missing value" a fresh install has not
ALTER TABLE queue.queue_config
    ADD COLUMN rate_limit int,
    ADD COLUMN rate_period interval,
    ADD COLUMN group_max_running int;
UPDATE queue.queue_config SET rate_period = '1 second', group_max_running = 1;
ALTER TABLE queue.queue_config
    ALTER rate_period SET DEFAULT '1 second',
    ALTER rate_period SET NOT NULL,
    ALTER group_max_running SET DEFAULT 1,
    ALTER group_max_running SET NOT NULL;
ALTER TABLE queue.queue_config DROP CONSTRAINT queue_config_options;
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
GRANT UPDATE (rate_limit, rate_period, group_max_running) ON queue.queue_config TO PUBLIC;

-- create and alter take the new options: new signatures.
DROP FUNCTION queue._check_options(int, interval, interval, interval, interval, int, text);
DROP FUNCTION queue._create(text, int, interval, interval, interval, interval, boolean, int, text);
DROP FUNCTION queue._alter(text, int, interval, interval, interval, interval, int, text);
DROP FUNCTION queue.alter(text, int, interval, interval, interval, interval, int, text);

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

/*
 * queue.create is executable only by the roles it was granted to: the new
 * function is granted to them too.  Grants made in this script would count
 * as the extension's initial privileges, which pg_dump leaves out, so the
 * initial privileges are put back to what the script itself set.
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

REVOKE EXECUTE ON FUNCTION queue.create(text, int, interval, interval, interval, interval, boolean, int, text,
                                        int, interval, int) FROM PUBLIC;
DO $$
DECLARE
    old_fn  regprocedure := 'queue.create(text, int, interval, interval, interval, interval, boolean, int, text)';
    new_fn  regprocedure := 'queue.create(text, int, interval, interval, interval, interval, boolean, int, text, int, interval, int)';
    initial aclitem[];
    g       record;
BEGIN
    SELECT p.proacl INTO initial FROM pg_catalog.pg_proc p WHERE p.oid = new_fn;
    FOR g IN SELECT a.grantee, a.is_grantable
               FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
              WHERE p.oid = old_fn AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', new_fn,
            CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
            CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    UPDATE pg_catalog.pg_init_privs ip SET initprivs = initial
     WHERE ip.objoid = new_fn AND ip.classoid = 'pg_catalog.pg_proc'::regclass AND ip.objsubid = 0;
END
$$;
DROP FUNCTION queue.create(text, int, interval, interval, interval, interval, boolean, int, text);

REVOKE EXECUTE ON FUNCTION queue._create, queue._alter FROM PUBLIC;

CREATE OR REPLACE VIEW queue.queues WITH (security_barrier) AS
SELECT c.name AS queue, c.max_attempts, c.lease, c.backoff_base, c.backoff_max,
       c.retention, c.paused, c.created_at, c.max_running, c.group_retry, c.rate_limit, c.rate_period,
       c.group_max_running
  FROM queue.queue_config c
 WHERE queue._may(c.qno, 'any');
