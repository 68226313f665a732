/*-------------------------------------------------------------------------
 *
 * qcache.c
 *	  Each backend's cache of queue definitions and of the saved SPI plans
 *	  that run against each queue's tables.
 *
 * queue_config rows are read once per backend and kept until a
 * transaction that changed queue_config commits; queue._invalidate() sends
 * a relcache invalidation for queue_config then, and our callback marks the
 * whole cache stale.  Entries and plans of a stale cache may still be in
 * use further up the stack (a trigger on a job table can call us from
 * inside a claim), so they are freed only at the end of the transaction.
 *
 * All SPI work runs with search_path pinned to pg_catalog (and no pg_temp),
 * so neither a caller's search_path nor objects it created can change what
 * our statements mean, and saved plans are never replanned for a change of
 * search_path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "optimizer/cost.h"
#include "optimizer/planner.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "queue.h"

static HTAB *queue_by_qno = NULL;

/*
 * The same entries by name, which is how most calls name their queue.  An
 * entry of queue_by_qno never moves, so this one points at it; it goes
 * with queue_by_qno (queue_cache_reset), never on its own.
 */
typedef struct QueueNameEntry
{
	char		name[NAMEDATALEN];	/* hash key */
	QueueInfo  *q;
} QueueNameEntry;

static HTAB *queue_by_name = NULL;
static MemoryContext queue_cache_cxt = NULL;
static bool queue_cache_stale = false;
static Oid	queue_config_relid = InvalidOid;
static List *dead_caches = NIL;
static OverrideSearchPath *pinned_path = NULL;
static int	spi_depth = 0;		/* QueueSpiBegin scopes open */
static planner_hook_type prev_planner_hook = NULL;

static PlannedStmt *queue_planner(Query *parse, const char *query_string,
								  int cursor_options, ParamListInfo bound_params);

static void
queue_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == queue_config_relid)
		queue_cache_stale = true;
}

static void
free_dead_caches(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		event != XACT_EVENT_PARALLEL_COMMIT && event != XACT_EVENT_PARALLEL_ABORT &&
		event != XACT_EVENT_PREPARE)
		return;
	spi_depth = 0;				/* scopes an error left open */
	foreach(lc, dead_caches)
	{
		HTAB	   *cache = (HTAB *) lfirst(lc);
		HASH_SEQ_STATUS status;
		QueueInfo  *q;

		hash_seq_init(&status, cache);
		while ((q = hash_seq_search(&status)) != NULL)
		{
			for (int i = 0; i < NUM_QUEUE_PLANS; i++)
				if (q->plans[i] != NULL)
					SPI_freeplan(q->plans[i]);
			QueueInsertForget(q->insert);
			QueueInsertForget(q->archive_insert);
		}
		hash_destroy(cache);
	}
	list_free(dead_caches);
	dead_caches = NIL;
}

void
QueueCacheInit(void)
{
	CacheRegisterRelcacheCallback(queue_relcache_callback, (Datum) 0);
	RegisterXactCallback(free_dead_caches, NULL);
	prev_planner_hook = planner_hook;
	planner_hook = queue_planner;
}

static void
queue_cache_reset(void)
{
	HASHCTL		ctl;

	/*
	 * The old entries stay until the transaction ends: a caller may still
	 * use one, and even prepare plans on it, which then go with it.
	 */
	if (queue_by_qno != NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		dead_caches = lappend(dead_caches, queue_by_qno);
		MemoryContextSwitchTo(old);
	}

	if (queue_cache_cxt == NULL)
		queue_cache_cxt = AllocSetContextCreate(CacheMemoryContext, "queue cache",
												ALLOCSET_SMALL_SIZES);
	ctl.keysize = sizeof(int32);
	ctl.entrysize = sizeof(QueueInfo);
	ctl.hcxt = queue_cache_cxt;
	queue_by_qno = hash_create("queue cache", 32, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	if (queue_by_name != NULL)
		hash_destroy(queue_by_name);
	ctl.keysize = NAMEDATALEN;
	ctl.entrysize = sizeof(QueueNameEntry);
	queue_by_name = hash_create("queue cache by name", 32, &ctl,
								HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	queue_cache_stale = false;
}

/* Whether queue_config changed since the cache was read. */
bool
QueueCacheStale(void)
{
	return queue_cache_stale;
}

/* Have the next lookup read queue_config again. */
void
QueueCacheForget(void)
{
	queue_cache_stale = true;
}

/*
 * Connect to SPI with search_path pinned.  The override is popped by
 * QueueSpiEnd, or by transaction abort if an error intervenes.
 */
void
QueueSpiBegin(void)
{
	if (pinned_path == NULL)
	{
		pinned_path = MemoryContextAllocZero(TopMemoryContext, sizeof(OverrideSearchPath));
		pinned_path->schemas = NIL;
		pinned_path->addCatalog = true;
		pinned_path->addTemp = false;
	}
	SPI_connect();
	PushOverrideSearchPath(pinned_path);
	spi_depth++;
}

void
QueueSpiEnd(void)
{
	PopOverrideSearchPath();
	SPI_finish();
	Assert(spi_depth > 0);
	spi_depth--;
}

/* The planner we stand in front of. */
static PlannedStmt *
plan_on(Query *parse, const char *query_string, int cursor_options, ParamListInfo bound_params)
{
	if (prev_planner_hook != NULL)
		return prev_planner_hook(parse, query_string, cursor_options, bound_params);
	return standard_planner(parse, query_string, cursor_options, bound_params);
}

/*
 * Plan our saved statements without sequential scans.  Every one of them
 * has an index that serves it, but the plan cache replans a saved plan
 * whenever something invalidates it, autovacuum's update of the table's
 * pg_class row included, and the planner goes by the table's size at that
 * moment.  A queue is often empty then, and for an empty table a
 * sequential scan is the cheapest plan: it stayed in use while a backlog
 * of 20,000 jobs built up, and every promotion, fail, release and enqueue
 * into a group read the whole table (sql/plans.sql).
 *
 * Our plans are the generic ones (QueueGetPlan) planned inside
 * QueueSpiBegin; anything else planned there, such as a statement of a
 * trigger on a queue's table, is planned as usual.  Setting enable_seqscan
 * through the GUC machinery instead, around every call, took a tenth of
 * the CPU of enqueue() called in a loop; here only planning pays, and
 * rarely.  An error inside a scope leaves spi_depth behind until the
 * transaction ends, which only matters to other generic plans made
 * meanwhile.
 */
static PlannedStmt *
queue_planner(Query *parse, const char *query_string, int cursor_options,
			  ParamListInfo bound_params)
{
	bool		save = enable_seqscan;
	PlannedStmt *result = NULL;

	if (spi_depth == 0 || (cursor_options & CURSOR_OPT_GENERIC_PLAN) == 0)
		return plan_on(parse, query_string, cursor_options, bound_params);

	enable_seqscan = false;
	PG_TRY();
	{
		result = plan_on(parse, query_string, cursor_options, bound_params);
	}
	PG_FINALLY();
	{
		enable_seqscan = save;
	}
	PG_END_TRY();
	return result;
}

/*
 * Run plan on the latest snapshot, also under REPEATABLE READ: for what is
 * read like a catalog (queue_config) or is the queue's own bookkeeping
 * (slots, leases), where the transaction's snapshot would see old rows, or
 * make every row changed since it was taken a serialization failure.
 */
int
QueueExecuteLatest(SPIPlanPtr plan, Datum *args, bool read_only, long count)
{
	return SPI_execute_snapshot(plan, args, NULL, GetLatestSnapshot(), InvalidSnapshot,
								read_only, true, count);
}

/* An error unless the user has privilege mode on queue.queue_config. */
void
QueueCheckConfigPrivilege(AclMode mode)
{
	Oid			relid = get_relname_relid("queue_config", get_namespace_oid("queue", false));

	if (pg_class_aclcheck(relid, GetUserId(), mode) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, "queue_config");
}

static void
ensure_extension(void)
{
	Oid			nsp = get_namespace_oid("queue", true);

	if (OidIsValid(nsp))
		queue_config_relid = get_relname_relid("queue_config", nsp);
	if (!OidIsValid(nsp) || !OidIsValid(queue_config_relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"queue\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION queue.")));
}

/*
 * Read a queue_config row (selected by name or by number) into the cache.
 * Returns NULL if there is none.  Must be called inside QueueSpiBegin.
 */
static QueueInfo *
load_queue(const char *name, int32 qno)
{
	Datum		arg;
	Oid			argtype;
	int			ret;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	int32		found_qno;
	QueueInfo  *q;
	QueueNameEntry *ne;
	bool		found;
	SPIPlanPtr	plan;

	if (name != NULL)
	{
		arg = CStringGetTextDatum(name);
		argtype = TEXTOID;
	}
	else
	{
		arg = Int32GetDatum(qno);
		argtype = INT4OID;
	}
	plan = SPI_prepare(name != NULL ?
					   "SELECT qno, name, max_attempts, lease, backoff_base, backoff_max,"
					   " retention > interval '0', paused, coalesce(max_running, 0), group_retry = 'requeue',"
					   " archive_seg FROM queue.queue_config WHERE name = $1" :
					   "SELECT qno, name, max_attempts, lease, backoff_base, backoff_max,"
					   " retention > interval '0', paused, coalesce(max_running, 0), group_retry = 'requeue',"
					   " archive_seg FROM queue.queue_config WHERE qno = $1",
					   1, &argtype);

	/*
	 * Read as committed now, like a catalog: the cache is reloaded when a
	 * change commits (queue._invalidate), often in the middle of a
	 * statement whose snapshot predates the change.  Read with that
	 * snapshot, the old settings would be kept as new until the next
	 * change.
	 */
	if (plan == NULL)
		ret = SPI_result;
	else
	{
		ret = QueueExecuteLatest(plan, &arg, true, 1);
		SPI_freeplan(plan);
	}
	if (ret != SPI_OK_SELECT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not read queue.queue_config"),
				 errdetail("The statement returned %s.", SPI_result_code_string(ret)),
				 errhint("A rule on queue.queue_config rewrote the statement; drop it.")));
	if (SPI_processed == 0)
		return NULL;

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	found_qno = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
	q = hash_search(queue_by_qno, &found_qno, HASH_ENTER, &found);
	if (!found)
	{
		memset(((char *) q) + sizeof(int32), 0, sizeof(QueueInfo) - sizeof(int32));
		strlcpy(q->name, TextDatumGetCString(SPI_getbinval(tup, desc, 2, &isnull)), NAMEDATALEN);
		q->max_attempts = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
		q->lease = *DatumGetIntervalP(SPI_getbinval(tup, desc, 4, &isnull));
		q->backoff_base = *DatumGetIntervalP(SPI_getbinval(tup, desc, 5, &isnull));
		q->backoff_max = *DatumGetIntervalP(SPI_getbinval(tup, desc, 6, &isnull));
		q->keep_archive = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
		q->paused = DatumGetBool(SPI_getbinval(tup, desc, 8, &isnull));
		q->max_running = DatumGetInt32(SPI_getbinval(tup, desc, 9, &isnull));
		q->group_requeue = DatumGetBool(SPI_getbinval(tup, desc, 10, &isnull));
		q->archive_seg = DatumGetInt16(SPI_getbinval(tup, desc, 11, &isnull));
		q->seqid = InvalidOid;
	}
	/* (also when found: an error between the two entries may have left it out) */
	ne = hash_search(queue_by_name, q->name, HASH_ENTER, NULL);
	ne->q = q;
	return q;
}

static void
check_queue_name(const char *name, int len)
{
	bool		ok = len >= 1 && len <= 48 && name[0] >= 'a' && name[0] <= 'z';

	for (int i = 0; ok && i < len; i++)
		ok = (name[i] >= 'a' && name[i] <= 'z') ||
			(name[i] >= '0' && name[i] <= '9') || name[i] == '_';
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid queue name \"%s\"", name),
				 errdetail("Queue names are 1 to 48 lowercase letters, digits and underscores, starting with a letter."),
				 errhint("Choose a name such as 'emails' or 'sms_bulk'.")));
}

/* Must be called inside QueueSpiBegin. */
QueueInfo *
QueueLookupByName(text *name)
{
	char	   *str;
	QueueNameEntry *ne;
	QueueInfo  *q;

	if (name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue name must not be null"),
				 errhint("Pass the name of a queue, for example 'emails'.")));
	str = text_to_cstring(name);
	check_queue_name(str, strlen(str));

	/* a change committed since the last look (see load_queue) */
	AcceptInvalidationMessages();
	if (queue_by_qno == NULL || queue_cache_stale)
	{
		ensure_extension();
		queue_cache_reset();
	}

	ne = hash_search(queue_by_name, str, HASH_FIND, NULL);
	if (ne != NULL)
		return ne->q;

	q = load_queue(str, 0);
	if (q == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("queue \"%s\" does not exist", str),
				 errhint("Create it with queue.create('%s'), or list queues with SELECT * FROM queue.queues.", str)));
	return q;
}

/* Must be called inside QueueSpiBegin. */
QueueInfo *
QueueLookupById(int64 id, bool missing_ok)
{
	int32		qno = (int32) (id % QUEUE_ID_FACTOR);
	QueueInfo  *q = NULL;

	AcceptInvalidationMessages();
	if (queue_by_qno == NULL || queue_cache_stale)
	{
		ensure_extension();
		queue_cache_reset();
	}
	if (id > 0)
	{
		q = hash_search(queue_by_qno, &qno, HASH_FIND, NULL);
		if (q == NULL)
			q = load_queue(NULL, qno);
	}
	if (q == NULL && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("job " INT64_FORMAT " does not exist", id),
				 errdetail("No queue holds job ids like it."),
				 errhint("Job ids are returned by queue.enqueue() and queue.claim().")));
	return q;
}

/*
 * Queue number qno (not a job id); NULL if there is none and missing_ok.
 * Must be called inside QueueSpiBegin.
 */
QueueInfo *
QueueLookupByQno(int32 qno, bool missing_ok)
{
	QueueInfo  *q = NULL;

	if (qno > 0 && qno < QUEUE_ID_FACTOR)
		q = QueueLookupById(qno, true);
	if (q == NULL && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("queue number %d does not exist", qno),
				 errhint("List queues with SELECT * FROM queue.queues.")));
	return q;
}

/* The queue's sequence, queue."q_<name>$seq". */
Oid
QueueSeqRelid(QueueInfo *q)
{
	if (!OidIsValid(q->seqid))
	{
		char		seqname[NAMEDATALEN + 8];

		snprintf(seqname, sizeof(seqname), "q_%s$seq", q->name);
		q->seqid = get_relname_relid(seqname, get_namespace_oid("queue", false));
		if (!OidIsValid(q->seqid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("sequence queue.\"%s\" of queue \"%s\" is missing", seqname, q->name),
					 errhint("The queue's objects were changed by hand; drop and re-create the queue.")));
	}
	return q->seqid;
}

int64
QueueNextSeq(QueueInfo *q)
{
	return nextval_internal(QueueSeqRelid(q), true);
}

/*
 * The queue's table, queue.q_<name>; InvalidOid if it is missing.  Looked
 * up each time (two syscache probes): nothing would tell a cached oid
 * that the table was replaced.
 */
Oid
QueueTableRelid(QueueInfo *q)
{
	char		tname[NAMEDATALEN + 4];

	snprintf(tname, sizeof(tname), "q_%s", q->name);
	return get_relname_relid(tname, get_namespace_oid("queue", false));
}

/* The text of one plan, for queue q. */
static char *
plan_sql(QueueInfo *q, QueuePlanId which)
{
	StringInfoData buf;
	char		tname[NAMEDATALEN + 4];
	char		aname[NAMEDATALEN + 4];
	char		sname[NAMEDATALEN + 8];
	char		slname[NAMEDATALEN + 4];
	char		lname[NAMEDATALEN + 4];
	const char *t;
	const char *l;
	const char *a;
	const char *s;
	const char *sl;
	const char *claim_pick = NULL;
	bool		lease_in_place = false;

	snprintf(tname, sizeof(tname), "q_%s", q->name);
	snprintf(aname, sizeof(aname), "a_%s", q->name);
	snprintf(sname, sizeof(sname), "q_%s$seq", q->name);
	snprintf(slname, sizeof(slname), "s_%s", q->name);
	snprintf(lname, sizeof(lname), "l_%s", q->name);
	t = quote_qualified_identifier("queue", tname);
	sl = quote_qualified_identifier("queue", slname);
	a = quote_qualified_identifier("queue", aname);
	l = quote_qualified_identifier("queue", lname);
	s = quote_literal_cstr(quote_qualified_identifier("queue", sname));

	initStringInfo(&buf);
	switch (which)
	{
		case PLAN_INSERT:
		case PLAN_INSERT_DEDUP:
			appendStringInfo(&buf,
							 "INSERT INTO %s (id, rank, run_at, enqueued_at, state, priority, attempt,"
							 " group_key, dedup_key, payload)"
							 " VALUES ($1, $1 / 1000000, $2, now(), $3::queue.job_state,"
							 " $4, 0, $5, $6, $7)", t);
			if (which == PLAN_INSERT_DEDUP)
				appendStringInfoString(&buf,
									   " ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL"
									   " AND state <> 'dead' DO NOTHING RETURNING id");
			break;
		case PLAN_FIND_DEDUP:
			appendStringInfo(&buf,
							 "SELECT id FROM %s WHERE dedup_key = $1 AND state <> 'dead'", t);
			break;
		case PLAN_INSERT_BATCH:
			appendStringInfo(&buf,
							 "INSERT INTO %s (id, rank, run_at, enqueued_at, state, priority, attempt,"
							 " group_key, payload)"
							 " SELECT u.id, u.id / 1000000, $3, now(),"
							 " (CASE WHEN u.n = 1 THEN $4 ELSE $7 END)::queue.job_state,"
							 " $5, 0, $6, u.p FROM unnest($1, $2) WITH ORDINALITY AS u(id, p, n)", t);
			break;
		case PLAN_PROMOTE:

			/*
			 * The next due time counts jobs due after $1 only: one due by
			 * then and still scheduled is ours (our snapshot shows it as it
			 * was) or another promotion's in flight, which makes it ready
			 * when it commits and brings the due time back if it aborts
			 * (xact.c).  Only if we stopped at $4 jobs are more due
			 * at once.  Otherwise, if one we did not take is left, it may
			 * instead be locked by something that will not make it ready
			 * (a cancel that rolls back, a user's FOR UPDATE): someone must
			 * look again, at $3 (a naptime on).  NOT IN (SELECT ...) is
			 * hashed, where <> ALL (ARRAY(...)) would compare every due
			 * entry with every job we took.  Whether one was left is the
			 * fifth column too (see promote_due).
			 */
			appendStringInfo(&buf,
							 "WITH u AS (UPDATE %s SET state = 'ready', rank = nextval(%s)"
							 " WHERE id = ANY (ARRAY(SELECT id FROM %s"
							 " WHERE state = 'scheduled' AND run_at <= $1"
							 " ORDER BY run_at LIMIT $4 FOR UPDATE SKIP LOCKED))"
							 " RETURNING id, priority, rank),"
							 " l AS (SELECT (SELECT run_at FROM %s WHERE state = 'scheduled'"
							 " AND run_at <= $1 AND id NOT IN (SELECT id FROM u)"
							 " ORDER BY run_at LIMIT 1) IS NOT NULL AS left_due)"
							 " SELECT count(*), max(priority), min(rank),"
							 " CASE WHEN count(*) > 0 THEN least("
							 "CASE WHEN count(*) = $4 THEN $1 + interval '1 microsecond'"
							 " WHEN (SELECT left_due FROM l) THEN $3 END,"
							 " (SELECT run_at FROM %s WHERE state = 'scheduled'"
							 " AND run_at > $1 ORDER BY run_at LIMIT 1),"
							 " (SELECT lease_until FROM %s WHERE state = 'running'"
							 " ORDER BY lease_until LIMIT 1), $2) END,"
							 " (SELECT left_due FROM l) FROM u",
							 t, s, t, t, t, t);
			break;
		case PLAN_LEASE_FRONT:
			lease_in_place = true;
			/* FALLTHROUGH */
		case PLAN_CLAIM_FRONT:
			claim_pick = "state = 'ready' AND NOT queue._leased(id) ORDER BY priority DESC, rank";
			break;
		case PLAN_LEASE_AT:
			lease_in_place = true;
			/* FALLTHROUGH */
		case PLAN_CLAIM_AT:
			claim_pick = "state = 'ready' AND NOT queue._leased(id) AND priority = $6 AND rank >= $7 ORDER BY rank";
			break;
		case PLAN_LEASE_BELOW:
			lease_in_place = true;
			/* FALLTHROUGH */
		case PLAN_CLAIM_BELOW:
			claim_pick = "state = 'ready' AND NOT queue._leased(id) AND priority < $6 ORDER BY priority DESC, rank";
			break;
		case PLAN_COMPLETE_ARCHIVE:
			appendStringInfo(&buf,
							 "DELETE FROM %s WHERE id = ANY ($1) AND state = 'running'"
							 " AND ($2::int IS NULL OR attempt = $2) AND $3 IS NOT NULL"
							 " RETURNING id, payload, attempt, group_key, enqueued_at, lease_until, priority,"
							 " rank, run_at, dedup_key, last_error, history, uncounted, claimed_at", t);
			break;
		case PLAN_COMPLETE_DELETE:
			appendStringInfo(&buf,
							 "DELETE FROM %s WHERE id = ANY ($1) AND state = 'running'"
							 " AND ($2::int IS NULL OR attempt = $2) AND $3 IS NOT NULL"
							 " RETURNING id, group_key", t);
			break;
		case PLAN_LOCK_RUNNING:
			appendStringInfo(&buf,
							 "SELECT attempt - uncounted FROM %s WHERE id = $1 AND state = 'running'"
							 " AND ($2::int IS NULL OR attempt = $2) FOR UPDATE", t);
			break;
		case PLAN_FAIL:
			appendStringInfo(&buf,
							 "UPDATE %s SET state = $2::queue.job_state, run_at = $3,"
							 " rank = CASE WHEN $2 = 'dead' THEN rank ELSE nextval(%s) END,"
							 " lease_until = NULL, owner_pid = NULL, owner_start = NULL, last_error = $4,"
							 " history = coalesce(history, '[]') || jsonb_build_object('event', 'failed',"
							 " 'at', $5, 'attempt', attempt, 'claimed_at', claimed_at, 'detail', $4)"
							 " WHERE id = $1 RETURNING priority, rank, group_key", t, s);
			break;
		case PLAN_RELEASE:
			appendStringInfo(&buf,
							 "UPDATE %s SET state = $2::queue.job_state, run_at = $3, rank = nextval(%s),"
							 " uncounted = uncounted + 1, lease_until = NULL, owner_pid = NULL, owner_start = NULL,"
							 " history = coalesce(history, '[]') || jsonb_build_object('event', 'released',"
							 " 'at', $4, 'attempt', attempt, 'claimed_at', claimed_at)"
							 " WHERE id = $1 RETURNING priority, rank", t, s);
			break;
		case PLAN_EXTEND:
			appendStringInfo(&buf,
							 "UPDATE %s SET lease_until = $3 WHERE id = $1 AND state = 'running'"
							 " AND ($2::int IS NULL OR attempt = $2) RETURNING lease_until", t);
			break;
		case PLAN_STATE:
			appendStringInfo(&buf, "SELECT state::text FROM %s WHERE id = $1", t);
			break;
		case PLAN_GROUP_BUSY:
			appendStringInfo(&buf,
							 "SELECT 1 FROM %s WHERE group_key = $1 AND state <> 'dead'"
							 " ORDER BY rank LIMIT 1", t);
			break;
		case PLAN_GROUP_ADVANCE:
			appendStringInfo(&buf,
							 "UPDATE %s SET rank = nextval(%s),"
							 " state = CASE WHEN run_at > $2 THEN 'scheduled' ELSE 'ready' END::queue.job_state"
							 " WHERE id = (SELECT id FROM %s WHERE group_key = $1 AND state = 'waiting'"
							 " ORDER BY rank LIMIT 1)"
							 " AND NOT EXISTS (SELECT 1 FROM %s WHERE group_key = $1"
							 " AND group_key IS NOT NULL AND state IN ('ready', 'scheduled', 'running'))"
							 " RETURNING priority, rank, run_at", t, s, t, t);
			break;
		case PLAN_GROUP_REQUEUE:
			appendStringInfo(&buf,
							 "UPDATE %s SET state = 'waiting', rank = nextval(%s) WHERE id = $1", t, s);
			break;
		case PLAN_SLOTS_TAKE:
			appendStringInfo(&buf,
							 "SELECT slot FROM %s WHERE job IS NULL AND slot <= $1"
							 " AND NOT EXISTS (SELECT 1 FROM %s WHERE slot > $1 AND job IS NOT NULL)"
							 " ORDER BY slot LIMIT $2 FOR UPDATE SKIP LOCKED", sl, sl);
			break;
		case PLAN_SLOTS_ASSIGN:
			appendStringInfo(&buf,
							 "UPDATE %s s SET job = u.j FROM unnest($1, $2) AS u(n, j) WHERE s.slot = u.n", sl);
			break;
		case PLAN_SLOTS_FREE:
			appendStringInfo(&buf,
							 "WITH d AS (DELETE FROM %s WHERE job = ANY ($1) AND slot > $2)"
							 " UPDATE %s SET job = NULL WHERE job = ANY ($1) AND slot <= $2 RETURNING slot",
							 sl, sl);
			break;
		case PLAN_SLOTS_MIGRATE:
			appendStringInfo(&buf,
							 "WITH o AS (DELETE FROM %s WHERE slot = (SELECT max(slot) FROM %s WHERE slot > $1)"
							 " AND job IS NOT NULL RETURNING job)"
							 " UPDATE %s s SET job = o.job FROM o WHERE s.slot = $2", sl, sl, sl);
			break;
		case PLAN_REINSERT:
			appendStringInfo(&buf,
							 "INSERT INTO %s (id, payload, attempt, group_key, enqueued_at, lease_until,"
							 " priority, rank, run_at, dedup_key, last_error, history, uncounted, claimed_at,"
							 " owner_pid, owner_start, state)"
							 " SELECT u.*, $15, $16, 'running'"
							 " FROM unnest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) AS u", t);
			break;
		case PLAN_ARCHIVE_HELD:
			appendStringInfo(&buf,
							 "INSERT INTO %s (id, payload, attempt, group_key, enqueued_at, priority,"
							 " run_at, dedup_key, last_error, history, claimed_at, finished_at, state)"
							 " SELECT u.id, u.payload, u.attempt, u.group_key, u.enqueued_at, u.priority,"
							 " u.run_at, u.dedup_key, u.last_error, u.history, u.claimed_at, $15, 'done'"
							 " FROM unnest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
							 " AS u(id, payload, attempt, group_key, enqueued_at, lease_until, priority,"
							 " rank, run_at, dedup_key, last_error, history, uncounted, claimed_at)", a);
			break;
		case PLAN_LEASE_INSERT:
			appendStringInfo(&buf,
							 "INSERT INTO %s (lease, lease_until, claimed_at, owner_pid, owner_start, ids, attempts)"
							 " VALUES ($1, $2, $3, $4, $5, $6, $7)", l);
			break;
		case PLAN_LEASE_DELETE:
			appendStringInfo(&buf, "DELETE FROM %s WHERE lease = $1", l);
			break;

			/*
			 * The statements of queue._tick_queue, which used to run them as
			 * dynamic SQL: planned on every call, a millisecond each, they
			 * were most of the worker's CPU with many queues.
			 */
		case PLAN_TICK_EXPIRE:
			appendStringInfo(&buf,
							 "WITH u AS (UPDATE %s j SET"
							 " state = CASE WHEN j.attempt - j.uncounted >= $2 THEN 'dead' ELSE 'ready' END"
							 "::queue.job_state,"
							 " rank = nextval(%s), run_at = greatest(j.run_at, $3),"
							 " lease_until = NULL, owner_pid = NULL, owner_start = NULL,"
							 " last_error = CASE WHEN j.lease_until < $3 THEN 'lease expired'"
							 " ELSE 'consumer disconnected' END,"
							 " history = coalesce(j.history, '[]') || jsonb_build_object("
							 "'event', CASE WHEN j.lease_until < $3 THEN 'lease expired'"
							 " ELSE 'consumer disconnected' END,"
							 " 'at', $3, 'attempt', j.attempt, 'claimed_at', j.claimed_at)"
							 " WHERE j.id = ANY (ARRAY(SELECT s.id FROM %s s WHERE s.state = 'running'"
							 " AND (s.lease_until < $3 OR s.owner_pid IS NOT NULL"
							 " AND NOT queue._owner_alive(s.owner_pid, s.owner_start))"
							 " ORDER BY s.lease_until LIMIT $1 FOR UPDATE SKIP LOCKED))"
							 " RETURNING j.id, j.state, j.group_key)"
							 " SELECT count(*) AS expired, count(*) FILTER (WHERE state = 'dead') AS n_dead,"
							 " array_agg(id) AS ids, array_agg(DISTINCT group_key) FILTER (WHERE"
							 " state = 'dead' AND group_key IS NOT NULL) AS dead_groups FROM u", t, s, t);
			break;
		case PLAN_TICK_NEXT_DUE:
			/* see queue._tick_queue */
			appendStringInfo(&buf,
							 "SELECT least(CASE WHEN $2 >= $3 THEN $1 END,"
							 " CASE WHEN (SELECT run_at FROM %s WHERE state = 'scheduled'"
							 " AND run_at <= $1 ORDER BY run_at LIMIT 1) IS NOT NULL THEN $1 + $4 END,"
							 " (SELECT run_at FROM %s WHERE state = 'scheduled' AND run_at > $1"
							 " ORDER BY run_at LIMIT 1),"
							 " (SELECT lease_until FROM %s WHERE state = 'running'"
							 " ORDER BY lease_until LIMIT 1))", t, t, t);
			break;
		case PLAN_TICK_LEASE_DUE:
			appendStringInfo(&buf, "SELECT lease_until FROM %s ORDER BY lease_until LIMIT 1", l);
			break;
		case PLAN_LEASE_RUNNING:
			appendStringInfo(&buf,
							 "UPDATE %s SET state = 'running', attempt = attempt + 1, claimed_at = $3,"
							 " lease_until = $4, owner_pid = $5, owner_start = $6"
							 " WHERE id = $1 AND state = 'ready' AND attempt = $2", t);
			break;
		case NUM_QUEUE_PLANS:
			pg_unreachable();	/* QueueGetPlan() checked which */
	}

	/*
	 * Claimed jobs leave the table until commit (see held.c), unless the
	 * claim is a transaction of its own: then they can only be written back
	 * as running, so they are updated in place.  Both return the held.c
	 * columns, HELD_ID to HELD_UNCOUNTED.  A ready row may be under a
	 * batch lease (lease.c): the scan passes over such rows, and each row
	 * is checked again once it is locked, when no claim can be leasing it
	 * any more.
	 */
	if (lease_in_place)
		appendStringInfo(&buf,
						 "WITH u AS (UPDATE %s SET state = 'running', attempt = attempt + 1,"
						 " lease_until = $5 + $1, claimed_at = $5, owner_pid = $3, owner_start = $4"
						 " WHERE id = ANY (ARRAY(SELECT id FROM %s WHERE %s LIMIT $2 FOR UPDATE SKIP LOCKED))"
						 " AND NOT queue._leased(id)"
						 " RETURNING id, payload, attempt, group_key, enqueued_at, lease_until, priority,"
						 " rank, run_at, dedup_key, last_error, history, uncounted)"
						 " SELECT * FROM u ORDER BY priority DESC, rank", t, t, claim_pick);
	else if (claim_pick != NULL)
		appendStringInfo(&buf,
						 "WITH d AS (DELETE FROM %s"
						 " WHERE id = ANY (ARRAY(SELECT id FROM %s WHERE %s LIMIT $2 FOR UPDATE SKIP LOCKED))"
						 " AND NOT queue._leased(id) RETURNING *)"
						 " SELECT id, payload, attempt + 1, group_key, enqueued_at, $5 + $1, priority, rank,"
						 " run_at, dedup_key, last_error, history, uncounted"
						 " FROM d ORDER BY priority DESC, rank", t, t, claim_pick);
	return buf.data;
}

static int
plan_args(QueuePlanId which, Oid *types)
{
	static const Oid insert[] = {INT8OID, TIMESTAMPTZOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, JSONBOID};
	static const Oid batch[] = {INT8ARRAYOID, JSONBARRAYOID, TIMESTAMPTZOID, TEXTOID, INT4OID, TEXTOID, TEXTOID};
	static const Oid group_advance[] = {TEXTOID, TIMESTAMPTZOID};
	static const Oid slots_take[] = {INT4OID, INT4OID};
	static const Oid slots_assign[] = {INT4ARRAYOID, INT8ARRAYOID};
	static const Oid claim[] = {INTERVALOID, INT4OID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID, INT8OID};
	static const Oid complete[] = {INT8ARRAYOID, INT4OID, TIMESTAMPTZOID};
	static const Oid fail[] = {INT8OID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID};
	static const Oid release[] = {INT8OID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID};
	static const Oid id_attempt_ts[] = {INT8OID, INT4OID, TIMESTAMPTZOID};
	const Oid  *src;
	int			n;

	switch (which)
	{
		case PLAN_INSERT:
		case PLAN_INSERT_DEDUP:
			src = insert, n = lengthof(insert);
			break;
		case PLAN_FIND_DEDUP:
			types[0] = TEXTOID;
			return 1;
		case PLAN_INSERT_BATCH:
			src = batch, n = lengthof(batch);
			break;
		case PLAN_PROMOTE:
			types[0] = TIMESTAMPTZOID;
			types[1] = TIMESTAMPTZOID;
			types[2] = TIMESTAMPTZOID;
			types[3] = INT4OID;
			return 4;
		case PLAN_CLAIM_FRONT:
		case PLAN_LEASE_FRONT:
			src = claim, n = 5;
			break;
		case PLAN_CLAIM_AT:
		case PLAN_LEASE_AT:
			src = claim, n = 7;
			break;
		case PLAN_CLAIM_BELOW:
		case PLAN_LEASE_BELOW:
			src = claim, n = 6;
			break;
		case PLAN_COMPLETE_ARCHIVE:
		case PLAN_COMPLETE_DELETE:
			src = complete, n = lengthof(complete);
			break;
		case PLAN_FAIL:
			src = fail, n = lengthof(fail);
			break;
		case PLAN_RELEASE:
			src = release, n = lengthof(release);
			break;
		case PLAN_LOCK_RUNNING:
			src = id_attempt_ts, n = 2;
			break;
		case PLAN_EXTEND:
			src = id_attempt_ts, n = 3;
			break;
		case PLAN_STATE:
			types[0] = INT8OID;
			return 1;
		case PLAN_GROUP_BUSY:
			types[0] = TEXTOID;
			return 1;
		case PLAN_GROUP_REQUEUE:
			types[0] = INT8OID;
			return 1;
		case PLAN_GROUP_ADVANCE:
			src = group_advance, n = lengthof(group_advance);
			break;
		case PLAN_SLOTS_TAKE:
			src = slots_take, n = lengthof(slots_take);
			break;
		case PLAN_SLOTS_ASSIGN:
			src = slots_assign, n = lengthof(slots_assign);
			break;
		case PLAN_SLOTS_FREE:
			types[0] = INT8ARRAYOID;
			types[1] = INT4OID;
			return 2;
		case PLAN_SLOTS_MIGRATE:
			types[0] = INT4OID;
			types[1] = INT4OID;
			return 2;
		case PLAN_REINSERT:
			{
				static const Oid reinsert[] = {INT8ARRAYOID, JSONBARRAYOID, INT4ARRAYOID, TEXTARRAYOID,
					TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID, INT4ARRAYOID, INT8ARRAYOID,
					TIMESTAMPTZARRAYOID, TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, INT4ARRAYOID,
				TIMESTAMPTZARRAYOID, INT4OID, TIMESTAMPTZOID};

				src = reinsert, n = lengthof(reinsert);
			}
			break;
		case PLAN_LEASE_INSERT:
			{
				static const Oid lease_insert[] = {INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID,
				TIMESTAMPTZOID, INT8ARRAYOID, INT4ARRAYOID};

				src = lease_insert, n = lengthof(lease_insert);
			}
			break;
		case PLAN_LEASE_DELETE:
			types[0] = INT8OID;
			return 1;
		case PLAN_TICK_EXPIRE:
			types[0] = INT4OID;
			types[1] = INT4OID;
			types[2] = TIMESTAMPTZOID;
			return 3;
		case PLAN_TICK_NEXT_DUE:
			types[0] = TIMESTAMPTZOID;
			types[1] = INT8OID;
			types[2] = INT4OID;
			types[3] = INTERVALOID;
			return 4;
		case PLAN_TICK_LEASE_DUE:
			return 0;
		case PLAN_LEASE_RUNNING:
			{
				static const Oid lease_running[] = {INT8OID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID,
				INT4OID, TIMESTAMPTZOID};

				src = lease_running, n = lengthof(lease_running);
			}
			break;
		case PLAN_ARCHIVE_HELD:
			{
				static const Oid archive[] = {INT8ARRAYOID, JSONBARRAYOID, INT4ARRAYOID, TEXTARRAYOID,
					TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID, INT4ARRAYOID, INT8ARRAYOID,
					TIMESTAMPTZARRAYOID, TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, INT4ARRAYOID,
				TIMESTAMPTZARRAYOID, TIMESTAMPTZOID};

				src = archive, n = lengthof(archive);
			}
			break;
		default:
			pg_unreachable();	/* QueueGetPlan() checked which */
	}
	memcpy(types, src, n * sizeof(Oid));
	return n;
}

/* The saved plan for one statement on queue q; made on first use. */
SPIPlanPtr
QueueGetPlan(QueueInfo *q, QueuePlanId which)
{
	Oid			types[16];
	int			nargs;
	SPIPlanPtr	plan;

	if ((int) which < 0 || which >= NUM_QUEUE_PLANS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg_internal("invalid plan id %d", (int) which)));
	if (q->plans[which] != NULL)
		return q->plans[which];

	nargs = plan_args(which, types);

	/* (clearer than the parser's error) */
	if (!OidIsValid(QueueTableRelid(q)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the table of queue \"%s\", queue.q_%s, does not exist", q->name, q->name),
				 errdetail("It was dropped without queue.drop(), for instance by DROP OWNED ... CASCADE."),
				 errhint("Drop the queue with queue.drop('%s'), and create it again.", q->name)));

	/*
	 * Generic plans: every statement here is an index lookup or an ordered
	 * index scan whatever its parameters, and the plan cache would
	 * otherwise keep replanning some of them (it judges claims by their
	 * LIMIT parameter), which was a third of a claim's time.  That holds
	 * only for what cannot be planned any other way (see queue_planner): a
	 * look for any one matching row (EXISTS, or LIMIT 1 alone) was planned
	 * as a sequential scan whenever the statistics said many rows match,
	 * and read the whole table when none did; after ANALYZE of a queue
	 * holding 20,000 scheduled jobs, every promotion did (sql/plans.sql).
	 * Without sequential scans it may be a bitmap scan, which reads every
	 * match first.  Such looks therefore ask for the first row in an
	 * index's order.
	 */
	plan = SPI_prepare_cursor(plan_sql(q, which), nargs, types, CURSOR_OPT_GENERIC_PLAN);
	if (plan == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not prepare a statement for queue \"%s\"", q->name),
				 errdetail("SPI returned %s.", SPI_result_code_string(SPI_result)),
				 errhint("The queue's tables were changed by hand; drop and re-create the queue.")));
	SPI_keepplan(plan);
	q->plans[which] = plan;
	return plan;
}
