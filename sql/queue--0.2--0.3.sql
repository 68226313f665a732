/* queue--0.2--0.3.sql: upgrade of the queue extension from 0.2 to 0.3 */

\echo Use "ALTER EXTENSION queue UPDATE TO '0.3'" to load this file. \quit

-- Every backend rereads queue_config after a change to it, from a
-- statement trigger: queue._invalidate(), which anyone could call to make
-- every backend reread it for nothing, goes.
CREATE FUNCTION queue._config_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'queue_config_changed'
LANGUAGE C;

CREATE TRIGGER config_changed AFTER INSERT OR UPDATE OR DELETE ON queue.queue_config
FOR EACH STATEMENT EXECUTE FUNCTION queue._config_changed();

-- queue._new_queue says whether the new queue got its shared state, and
-- queue.stats.shared_state which queues have it.
DROP FUNCTION queue._new_queue(int);

CREATE FUNCTION queue._new_queue(qno int)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_new_queue'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION queue._shared_state(qno int)
RETURNS boolean
AS 'MODULE_PATHNAME', 'queue_shared_state'
LANGUAGE C VOLATILE STRICT;

CREATE OR REPLACE FUNCTION queue._rotate_archive(r queue.queue_config, t timestamptz)
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

CREATE OR REPLACE FUNCTION queue.drop(queue text, if_exists boolean DEFAULT false)
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

CREATE OR REPLACE FUNCTION queue.pause(queue text)
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

CREATE OR REPLACE FUNCTION queue.resume(queue text)
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

DROP FUNCTION queue._invalidate();

CREATE OR REPLACE VIEW queue.stats AS
SELECT c.name AS queue, s.ready, s.scheduled, s.running, s.dead,
       s.oldest_ready_age, s.completed_last_minute, s.failed_last_minute, s.waiting,
       queue._shared_state(c.qno) AS shared_state
  FROM queue.queue_config c, LATERAL queue._stats(c) s;

-- Each queue's table gets the CHECK that 0.3's queue.create gives it: the
-- id names the queue, so that no row of one queue can pose as another's.
-- A row that already does makes the upgrade fail, naming the table: such a
-- row was forged by someone who may write the table, and needs a look.
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT q.qno, q.name FROM queue.queue_config q ORDER BY q.qno LOOP
        IF to_regclass(format('queue.%I', 'q_' || c.name)) IS NOT NULL THEN
            EXECUTE format('ALTER TABLE queue.%I ADD CONSTRAINT %I CHECK ((id %% 1000000) = %s)',
                           'q_' || c.name, 'q_' || c.name || '$id', c.qno);
        END IF;
    END LOOP;
END
$$;
