/*-------------------------------------------------------------------------
 *
 * cache.c
 *	  Each backend's cache of queue definitions: the rows of
 *	  queue.queue_config, with the saved plans (catalog/plans.c) and the
 *	  direct-access state (storage/direct.c) kept for each queue.
 *
 * queue_config rows are read once per backend and kept until a
 * transaction that changed queue_config commits; its trigger sends
 * a relcache invalidation for queue_config then, and our callback marks the
 * whole cache stale.  Entries and plans of a stale cache may still be in
 * use further up the stack (a trigger on a job table can call us from
 * inside a claim), so they are freed only at the end of the transaction
 * (QueueCacheAtEOXact); what storage/ keeps for an entry is freed by the
 * hook it gave QueueCacheInit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "base/errors.h"
#include "base/jobid.h"
#include "base/role.h"
#include "catalog/cache.h"
#include "catalog/spi.h"

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
static QueueReleaseHook release_hook = NULL;

/*
 * Counts relcache invalidations of any relation: what is kept of a queue's
 * tables (QueueOwner) is good while it has not moved.
 */
static uint64 relcache_gen = 1;

static void
queue_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == queue_config_relid)
		queue_cache_stale = true;
	relcache_gen++;
}

/* The generation of relcache invalidations seen so far. */
uint64
QueueRelcacheGen(void)
{
	return relcache_gen;
}

/* release: frees what others keep for an entry that goes */
void
QueueCacheInit(QueueReleaseHook release)
{
	release_hook = release;
	CacheRegisterRelcacheCallback(queue_relcache_callback, (Datum) 0);
}

/* The transaction ended: entries of caches gone stale meanwhile go. */
void
QueueCacheAtEOXact(void)
{
	ListCell   *lc;

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
			if (release_hook != NULL)
				release_hook(q);
			if (q->grants != NULL)
				pfree(q->grants);
		}
		hash_destroy(cache);
	}
	list_free(dead_caches);
	dead_caches = NIL;
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

/* Is the extension installed in this database? */
bool
QueueExtensionPresent(void)
{
	Oid			nsp = get_namespace_oid("queue", true);

	return OidIsValid(nsp) && OidIsValid(get_relname_relid("queue_config", nsp));
}

/* queue.queue_config, or an error if the extension is not installed. */
Oid
QueueConfigRelid(void)
{
	Oid			nsp = get_namespace_oid("queue", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid("queue_config", nsp) : InvalidOid;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"queue\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION queue.")));
	return relid;
}

/*
 * Take in changes committed since the last look (see load_queue), and
 * start afresh if the cache went stale.
 */
static void
cache_refresh(void)
{
	AcceptInvalidationMessages();
	if (queue_by_qno == NULL || queue_cache_stale)
	{
		queue_config_relid = QueueConfigRelid();
		queue_cache_reset();
	}
}

/*
 * Run plan (reading the extension's tables) as their owner: they have row
 * security, and the roles we work for see only some rows or none.
 */
static int
execute_as_config_owner(SPIPlanPtr plan, Datum *args)
{
	QueueAsRole as;
	int			ret;

	QueueAsRoleInScopeBegin(&as, QueueRelOwner(queue_config_relid, "queue_config"));
	ret = QueueExecuteLatest(plan, args, true, 0);
	QueueAsRoleEnd(&as);
	return ret;
}

static void
check_catalog_read(int ret, const char *table)
{
	if (ret != SPI_OK_SELECT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not read queue.%s", table),
				 errdetail("The statement returned %s.", SPI_result_code_string(ret)),
				 errhint("A rule on queue.%s rewrote the statement; drop it.", table)));
}

/* A grantee's privileges on a queue, as the bits of catalog/acl.h. */
#define GRANT_BITS \
	"bit_or(CASE privilege WHEN 'produce' THEN 1 WHEN 'consume' THEN 2 WHEN 'read' THEN 4 WHEN 'manage' THEN 8 END)"

/*
 * The roles given privileges on queue q (catalog/acl.c).  Without
 * queue.queue_grants (the extension's SQL is of 0.3 or before, until
 * ALTER EXTENSION queue UPDATE), privileges on the tables decide.
 */
static void
load_grants(QueueInfo *q)
{
	Oid			grants = get_relname_relid("queue_grants", get_rel_namespace(queue_config_relid));
	Oid			argtype = INT4OID;
	Datum		arg = Int32GetDatum(q->qno);
	SPIPlanPtr	plan;
	int			ret;

	q->legacy_acl = !OidIsValid(grants);
	if (q->legacy_acl)
		return;
	plan = SPI_prepare("SELECT grantee::oid, " GRANT_BITS " FROM queue.queue_grants WHERE qno = $1 GROUP BY grantee",
					   1, &argtype);
	ret = plan == NULL ? SPI_result : execute_as_config_owner(plan, &arg);
	if (plan != NULL)
		SPI_freeplan(plan);
	check_catalog_read(ret, "queue_grants");
	q->ngrants = (int) SPI_processed;
	q->grants = MemoryContextAlloc(TopMemoryContext, sizeof(QueueGrant) * Max(q->ngrants, 1));
	for (int i = 0; i < q->ngrants; i++)
	{
		bool		isnull;

		q->grants[i].role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		q->grants[i].privs = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
	}
}

/*
 * What the cache keeps of a queue_config row, in enter_row's order.  The
 * flow control columns came in 0.7: an older install, still running this
 * library until ALTER EXTENSION UPDATE, has none.
 */
#define CONFIG_COLUMNS \
	"SELECT qno, name, max_attempts, lease, backoff_base, backoff_max," \
	" retention > interval '0', paused, coalesce(max_running, 0), group_retry = 'requeue'," \
	" archive_seg, "
#define CONFIG_FLOW \
	"coalesce(rate_limit, 0), (extract(epoch FROM rate_period) * 1000000)::bigint, group_max_running"
#define CONFIG_NO_FLOW	"0, 0::bigint, 1"

static const char *
config_select(const char *where)
{
	bool		has_flow = get_attnum(queue_config_relid, "rate_limit") != InvalidAttrNumber;

	return psprintf("%s%s FROM queue.queue_config%s", CONFIG_COLUMNS,
					has_flow ? CONFIG_FLOW : CONFIG_NO_FLOW, where);
}

/*
 * The cache entry of a row of config_select(), made if it is not there
 * (*found says); its grants are for the caller to load.
 */
static QueueInfo *
enter_row(HeapTuple tup, TupleDesc desc, bool *found)
{
	bool		isnull;
	int32		qno = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
	QueueInfo  *q = hash_search(queue_by_qno, &qno, HASH_ENTER, found);
	QueueNameEntry *ne;

	if (!*found)
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
		q->rate_limit = DatumGetInt32(SPI_getbinval(tup, desc, 12, &isnull));
		q->rate_period_us = DatumGetInt64(SPI_getbinval(tup, desc, 13, &isnull));
		q->group_max_running = DatumGetInt32(SPI_getbinval(tup, desc, 14, &isnull));
		q->seqid = InvalidOid;
	}
	/* (also when found: an error between the two entries may have left it out) */
	ne = hash_search(queue_by_name, q->name, HASH_ENTER, NULL);
	ne->q = q;
	return q;
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
	QueueInfo  *q;
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
	plan = SPI_prepare(config_select(name != NULL ? " WHERE name = $1" : " WHERE qno = $1"),
					   1, &argtype);

	/*
	 * Read as committed now, like a catalog: the cache is reloaded when a
	 * change commits (queue._config_changed), often in the middle of a
	 * statement whose snapshot predates the change.  Read with that
	 * snapshot, the old settings would be kept as new until the next
	 * change.
	 */
	if (plan == NULL)
		ret = SPI_result;
	else
	{
		ret = execute_as_config_owner(plan, &arg);
		SPI_freeplan(plan);
	}
	check_catalog_read(ret, "queue_config");
	if (SPI_processed == 0)
		return NULL;

	q = enter_row(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, &found);
	if (!found)
		load_grants(q);
	return q;
}

/* Is name a valid queue name (1 to 48 of a-z, 0-9 and _, a letter first)? */
bool
QueueNameValid(const char *name)
{
	int			len = strlen(name);
	bool		ok = len >= 1 && len <= 48 && name[0] >= 'a' && name[0] <= 'z';

	for (int i = 0; ok && i < len; i++)
		ok = (name[i] >= 'a' && name[i] <= 'z') ||
			(name[i] >= '0' && name[i] <= '9') || name[i] == '_';
	return ok;
}

static void
check_queue_name(const char *name)
{
	if (!QueueNameValid(name))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid queue name \"%s\"", name),
				 errdetail("Queue names are 1 to 48 lowercase letters, digits and underscores, starting with a letter."),
				 errhint("Choose a name such as 'emails' or 'sms_bulk'.")));
}

/* The queue named name, or NULL.  Must be called inside QueueSpiBegin. */
QueueInfo *
QueueLookupByNameIfExists(text *name)
{
	char	   *str;
	QueueNameEntry *ne;

	QueueCheckNotNull(name == NULL, "queue name", "Pass the name of a queue, for example 'emails'.");
	str = text_to_cstring(name);
	check_queue_name(str);

	cache_refresh();

	ne = hash_search(queue_by_name, str, HASH_FIND, NULL);
	if (ne != NULL)
		return ne->q;
	return load_queue(str, 0);
}

/* Must be called inside QueueSpiBegin. */
QueueInfo *
QueueLookupByName(text *name)
{
	QueueInfo  *q = QueueLookupByNameIfExists(name);

	if (q == NULL)
	{
		char	   *str = text_to_cstring(name);

		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("queue \"%s\" does not exist", str),
				 errhint("Create it with queue.create('%s'), or list queues with SELECT * FROM queue.queues.", str)));
	}
	return q;
}

/*
 * Queues looked up and missed by one transaction after which the cache
 * reads every queue at once: a statement over all queues (queue.stats,
 * the views) read them one by one, two statements each, most of its time
 * with thousands of queues.
 */
#define MISSES_BEFORE_ALL	16

/* A row (qno, grantee, privileges) of queue_grants, for a queue just read. */
static void
add_grant(HeapTuple tup, TupleDesc desc)
{
	bool		isnull;
	int32		qno = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
	QueueInfo  *q = hash_search(queue_by_qno, &qno, HASH_FIND, NULL);
	int			n;

	if (q == NULL || q->ngrants >= 0)
		return;					/* not one of those just read */
	n = -q->ngrants - 1;
	q->grants = repalloc(q->grants, sizeof(QueueGrant) * (n + 1));
	q->grants[n].role = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
	q->grants[n].privs = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
	q->ngrants--;				/* -(n + 1) - 1: still to come */
}

/*
 * Read every queue_config row not in the cache, and their grants, with a
 * statement each.  Must be called inside QueueSpiBegin.
 */
static void
load_all_queues(void)
{
	Oid			grants = get_relname_relid("queue_grants", get_rel_namespace(queue_config_relid));
	SPIPlanPtr	plan = SPI_prepare(config_select(""), 0, NULL);
	List	   *fresh = NIL;
	ListCell   *lc;
	int			ret;

	ret = plan == NULL ? SPI_result : execute_as_config_owner(plan, NULL);
	if (plan != NULL)
		SPI_freeplan(plan);
	check_catalog_read(ret, "queue_config");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		found;
		QueueInfo  *q = enter_row(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, &found);

		if (found)
			continue;
		q->legacy_acl = !OidIsValid(grants);
		q->grants = MemoryContextAllocZero(TopMemoryContext, sizeof(QueueGrant));
		q->ngrants = -1;		/* grants to come */
		fresh = lappend(fresh, q);
	}
	if (OidIsValid(grants) && fresh != NIL)
	{
		plan = SPI_prepare("SELECT qno, grantee::oid, " GRANT_BITS " FROM queue.queue_grants GROUP BY qno, grantee",
						   0, NULL);
		ret = plan == NULL ? SPI_result : execute_as_config_owner(plan, NULL);
		if (plan != NULL)
			SPI_freeplan(plan);
		check_catalog_read(ret, "queue_grants");
		for (uint64 i = 0; i < SPI_processed; i++)
			add_grant(SPI_tuptable->vals[i], SPI_tuptable->tupdesc);
	}
	foreach(lc, fresh)
	{
		QueueInfo  *q = (QueueInfo *) lfirst(lc);

		q->ngrants = -q->ngrants - 1;
	}
}

/* A lookup of queue qno missed: read it, or (after a few) every queue. */
static QueueInfo *
load_missed(int32 qno)
{
	static LocalTransactionId miss_lxid = InvalidLocalTransactionId;
	static int	misses = 0;

	if (miss_lxid != MyProc->lxid)
	{
		miss_lxid = MyProc->lxid;
		misses = 0;
	}
	if (++misses == MISSES_BEFORE_ALL)
	{
		load_all_queues();
		return hash_search(queue_by_qno, &qno, HASH_FIND, NULL);
	}
	return load_queue(NULL, qno);
}

/* Must be called inside QueueSpiBegin. */
QueueInfo *
QueueLookupById(int64 id, bool missing_ok)
{
	int32		qno = JobIdQueue(id);
	QueueInfo  *q = NULL;

	cache_refresh();
	if (id > 0)
	{
		q = hash_search(queue_by_qno, &qno, HASH_FIND, NULL);
		if (q == NULL)
			q = load_missed(qno);
	}
	if (q == NULL && !missing_ok)
		QueueErrorNoJob(id, "No queue holds job ids like it.",
						"Job ids are returned by queue.enqueue() and queue.claim().");
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

	if (QueueNumberValid(qno))
		q = QueueLookupById(qno, true);
	if (q == NULL && !missing_ok)
		QueueErrorNoQueueNumber(qno);
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

/* The queue's lease table, queue.l_<name>; InvalidOid if it is missing. */
Oid
QueueLeaseTableRelid(QueueInfo *q)
{
	char		tname[NAMEDATALEN + 4];

	snprintf(tname, sizeof(tname), "l_%s", q->name);
	return get_relname_relid(tname, get_namespace_oid("queue", false));
}
