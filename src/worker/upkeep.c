/*-------------------------------------------------------------------------
 *
 * upkeep.c
 *	  A database worker's upkeep passes: each queue's upkeep
 *	  (queue._tick_queue, then queue._end_leases) when it falls due.
 *
 * Each queue's upkeep runs as the owner of the queue's table, never as
 * superuser, in a subtransaction of its own so that one broken queue
 * cannot stall others, with a lock timeout so that one whose tables a
 * session keeps locked cannot either: it is tried again after a naptime.
 * A pass commits after every few queues it visits, so that it holds the
 * locks of a few queues at a time, however many there are.  The server's
 * lock table is shared by every session: a pass that held the locks of
 * every queue at once made other sessions fail with "out of shared
 * memory" once there were a few thousand queues.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "postmaster/interrupt.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "base/job.h"
#include "base/role.h"
#include "base/settings.h"
#include "shmem/queuestate.h"
#include "shmem/waits.h"
#include "shmem/wakeups.h"
#include "worker/pass.h"
#include "worker/upkeep.h"

/*
 * A due time of a queue that claims are waiting on is theirs for this many
 * ms: they wake for it and promote the job in the transaction that takes
 * it.  A pass of ours at the same moment would only compete with them for
 * the CPU and the WAL flush, making the job later; so we do not even wake
 * for it, only to look whether they did (with jobs falling due every few
 * ms, waking for each cost more CPU than the claims that took them).
 */
#define WAITERS_GRACE_MS		10

/*
 * Queues whose upkeep one transaction of a pass runs.  A queue's upkeep
 * locks about ten relations (its tables and their indexes), and the lock
 * table has room for max_locks_per_transaction (64 by default) per
 * session.  The worker commits asynchronously, so a commit costs little.
 */
#define QUEUES_PER_XACT			4

/*
 * A visit leaves the queue's relations in the relation cache and its
 * statements' plans in the queue cache, and a backend lets go of neither
 * on its own.  The first pass after a restart visits every queue: beside
 * 10,000 idle queues it left the worker holding 4.9 GB.  So every
 * FORGET_CHECK_VISITS visits, between two transactions, the worker looks
 * at what it holds, and past WORKER_MEMORY_LIMIT drops its caches as an
 * overflow of the invalidation queue would (InvalidateSystemCaches):
 * what busy queues need is read again at their next visit.  Memory the
 * caches freed may stay allocated to their contexts, so it does so again
 * only once that grew by a quarter of the limit: not at every check.
 */
#define FORGET_CHECK_VISITS		64
#define WORKER_MEMORY_LIMIT		((Size) 256 * 1024 * 1024)

static int	visits_unchecked = 0;
static Size held_after_forget = 0;

static void
forget_caches_if_large(int visits)
{
	Size		held;

	visits_unchecked += visits;
	if (visits_unchecked < FORGET_CHECK_VISITS)
		return;
	visits_unchecked = 0;
	held = MemoryContextMemAllocated(TopMemoryContext, true);
	if (held > WORKER_MEMORY_LIMIT && held > held_after_forget + WORKER_MEMORY_LIMIT / 4)
	{
		/* where an overflow of the invalidation queue is taken in */
		StartTransactionCommand();
		InvalidateSystemCaches();
		CommitTransactionCommand();
		held_after_forget = MemoryContextMemAllocated(TopMemoryContext, true);
	}
}

/* Only a rule on queue_config can make one of our SELECTs something else. */
static void
check_select(int ret, const char *what)
{
	if (ret != SPI_OK_SELECT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("queue worker could not %s", what),
				 errdetail("The statement returned %s.", SPI_result_code_string(ret)),
				 errhint("A rule on queue.queue_config rewrote the statement; drop it.")));
}

/*
 * When queue qno's archive ring may have work next (queue._archive_next):
 * DT_NOEND if not before jobs are archived.  Asked in the queue's own
 * subtransaction, with its row locked (so not for a queue dropped
 * meanwhile), so that an archive broken by its owner fails that queue
 * alone; 0 for a queue dropped meanwhile.
 */
static TimestampTz
archive_next(int32 qno)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(qno)};
	bool		isnull;
	Datum		d;
	int			ret;

	ret = SPI_execute_with_args("SELECT queue._archive_next(c, now()) FROM queue.queue_config c"
								" WHERE c.qno = $1", 1, argtypes, args, NULL, false, 1);
	check_select(ret, "look at the archive ring");
	if (SPI_processed != 1)
		return 0;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? DT_NOEND : DatumGetTimestampTz(d);
}

/*
 * Run upkeep statement sql (with the queue's number as $1 and cleanup as
 * $2) for queue qno, as owner, in a subtransaction of its own: one broken
 * queue must not stall the others.  The row lock keeps queue.drop (which
 * locks the row FOR UPDATE) out until we are done; a queue dropped since
 * we listed it is skipped.  It is taken as ourselves: a queue's owner may
 * read queue_config but not lock its rows.  With cleanup, the statement
 * runs unless due only if the queue's archive has work, and what the ring
 * shows afterwards is kept in shared memory, so that later cleanups pass
 * over the queue until then (looked at after the row lock, in the
 * subtransaction: an owner could otherwise break every pass by dropping
 * an archive segment).  Returns the statement's first column if
 * it is a timestamptz, read before the subtransaction frees it, or 0 (also
 * if it was NULL); *status says whether it ran.
 */
typedef enum UpkeepStatus
{
	UPKEEP_RAN,
	UPKEEP_SKIPPED,				/* dropped, or nothing to do */
	UPKEEP_FAILED				/* warned; tried again after a naptime */
} UpkeepStatus;

/* What upkeep_queue's subtransaction does, and learns. */
typedef struct UpkeepCall
{
	int32		qno;
	Oid			owner;
	bool		cleanup;
	bool		due;
	uint64		archive_gen;	/* read before the look, for QueueArchiveNextSet */
	const char *sql;
	TimestampTz result;
	UpkeepStatus status;
} UpkeepCall;

/* Whether the extension's SQL has queue._queue_stats (0.6 on). */
static bool
have_queue_stats(void)
{
	Oid			argtype = INT4OID;
	List	   *name = list_make1(makeString("queue"));

	name = lappend(name, makeString("_queue_stats"));
	return OidIsValid(LookupFuncName(name, 1, &argtype, true));
}

static bool
counts_known(int32 qno)
{
	int64		counts[JS_NSTATES];
	uint64		gen;

	return QueueCountsGet(qno, counts, &gen);
}

static void
upkeep_in_subxact(void *arg)
{
	UpkeepCall *c = (UpkeepCall *) arg;
	Datum		args[2] = {Int32GetDatum(c->qno), BoolGetDatum(c->cleanup)};
	Oid			argtypes[2] = {INT4OID, BOOLOID};
	QueueAsRole as;
	bool		isnull;

	check_select(SPI_execute_with_args("SELECT FROM queue.queue_config c WHERE c.qno = $1 FOR KEY SHARE",
									   1, argtypes, args, NULL, false, 1),
				 "lock the queue's configuration");
	if (SPI_processed != 1)
		return;
	if (c->cleanup && !c->due)
	{
		TimestampTz next = archive_next(c->qno);

		if (next > GetCurrentTimestamp())
		{
			QueueArchiveNextSet(c->qno, c->archive_gen, next);
			return;
		}
	}
	QueueAsRoleBegin(&as, c->owner);
	/* the owner's code on its tables (triggers) must not stall the pass */
	QueueOwnerTimeoutBegin();
	check_select(SPI_execute_with_args(c->sql, 2, argtypes, args, NULL, false, 1), "run upkeep");
	if (SPI_processed == 1)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull && SPI_gettypeid(SPI_tuptable->tupdesc, 1) == TIMESTAMPTZOID)
			c->result = DatumGetTimestampTz(d);
		c->status = UPKEEP_RAN;
	}

	/*
	 * Counts unknown (after a restart): count the queue's jobs, which
	 * queue._queue_stats keeps in shared memory.  Until they are known,
	 * every cleanup must look for orphans in the queue (may_have_running):
	 * beside 10,000 idle queues after a restart, that was a visit to each
	 * of them, 10 minutes of CPU, in every cleanup.  (A queue without a
	 * shared entry has nowhere to keep them.)
	 */
	if (c->status == UPKEEP_RAN && !counts_known(c->qno) && QueueStateHas(c->qno) && have_queue_stats())
		check_select(SPI_execute_with_args("SELECT FROM queue._queue_stats($1)", 1, argtypes, args,
										   NULL, false, 1),
					 "count the queue's jobs");
	QueueOwnerTimeoutCheck("upkeep");
	QueueAsRoleEnd(&as);
	if (c->cleanup)
		QueueArchiveNextSet(c->qno, c->archive_gen, archive_next(c->qno));
}

static TimestampTz
upkeep_queue(int32 qno, Oid owner, bool cleanup, bool due, const char *sql, UpkeepStatus *status)
{
	UpkeepCall	c = {qno, owner, cleanup, due, 0, sql, 0, UPKEEP_SKIPPED};
	ErrorData  *edata;

	if (cleanup)
	{
		TimestampTz ignored;

		(void) QueueArchiveNextGet(qno, &ignored, &c.archive_gen);
	}
	edata = QueueRunInSubxact(upkeep_in_subxact, &c);

	*status = c.status;
	if (edata == NULL)
		return c.result;
	if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE)
		ereport(LOG,
				(errmsg("queue worker skipped queue number %d: another session holds a lock its upkeep needs",
						qno),
				 errdetail("%s", edata->message),
				 errhint("The worker tries again after queue.worker_naptime; pg_locks shows who holds it.")));
	else if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
		ereport(LOG,
				(errmsg("queue worker skipped queue number %d: its upkeep took longer than queue.upkeep_timeout",
						qno),
				 errhint("Code of the queue's owner on its tables, a trigger say, may be slow; "
						 "the worker tries again after queue.worker_naptime.")));
	else
		ereport(WARNING,
				(errmsg("queue worker could not maintain queue number %d: %s", qno, edata->message),
				 errhint("The worker tries again on its next pass.")));
	FreeErrorData(edata);
	*status = UPKEEP_FAILED;
	return 0;
}

/* *next becomes t if t is a time (not 0, not infinity) before it. */
static void
note_next(TimestampTz *next, TimestampTz t)
{
	if (t != 0 && t != DT_NOEND && (*next == 0 || t < *next))
		*next = t;
}

/*
 * The database's queues and their retention, as of the last pass that
 * read them: read again after an invalidation of queue_config (create,
 * alter and drop send one, see worker/pass.c) and every REREAD_CLEANUPS
 * cleanup passes, for rows of queue_config written without one (a
 * data-only restore).  The owner of a queue's table is looked up in the
 * system caches when the queue is visited, so that the list does not
 * depend on pg_class: joining it with pg_class by name scanned pg_class
 * (25 rows per queue), and any table made, vacuumed or dropped anywhere
 * invalidated pg_class; a worker re-reading after each of 9,000 creates
 * used two thirds of a core.
 */
#define REREAD_CLEANUPS		6

static int	nknown = 0;
static int32 *known_qnos = NULL;
static NameData *known_names = NULL;
static Interval *known_retentions = NULL;
static uint64 queues_read = 0;	/* WorkerConfigChanges() when the list was read */

/*
 * What shared memory knows of the archive ring of a queue whose retention
 * changed is forgotten: it was worked out with the old one.  Both lists
 * are in qno order.
 */
static void
forget_changed_archives(int nold, const int32 *old_qnos, const Interval *old_retentions)
{
	int			o = 0;

	for (int i = 0; i < nknown; i++)
	{
		while (o < nold && old_qnos[o] < known_qnos[i])
			o++;
		if (o < nold && old_qnos[o] == known_qnos[i] &&
			memcmp(&old_retentions[o], &known_retentions[i], sizeof(Interval)) != 0)
			QueueArchiveForget(known_qnos[i]);
	}
}

/*
 * The owner of the table of queue i of known_qnos, from the system caches;
 * InvalidOid if the table is gone (the queue was dropped since the list
 * was read).
 */
static Oid
queue_owner(int i)
{
	char		relname[NAMEDATALEN];
	Oid			relid;
	HeapTuple	tup;
	Oid			owner;

	snprintf(relname, sizeof(relname), "q_%s", NameStr(known_names[i]));
	relid = get_relname_relid(relname, get_namespace_oid("queue", true));
	if (!OidIsValid(relid))
		return InvalidOid;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/* Read the queues again if a change may have made the list stale, or always. */
static void
read_queues(bool always)
{
	/* counted first: a change committed while we read is read next time */
	uint64		changes = WorkerConfigChanges();
	int			nold = nknown;
	int32	   *old_qnos = known_qnos;
	Interval   *old_retentions = known_retentions;
	int			ret;

	if (queues_read == changes && !always)
		return;
	ret = SPI_execute("SELECT c.qno, c.name, c.retention FROM queue.queue_config c ORDER BY c.qno",
					  true, 0);
	check_select(ret, "list the queues");
	if (known_names != NULL)
		pfree(known_names);
	nknown = SPI_processed;
	known_qnos = MemoryContextAlloc(TopMemoryContext, sizeof(int32) * Max(nknown, 1));
	known_names = MemoryContextAlloc(TopMemoryContext, sizeof(NameData) * Max(nknown, 1));
	known_retentions = MemoryContextAlloc(TopMemoryContext, sizeof(Interval) * Max(nknown, 1));
	for (int i = 0; i < nknown; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		known_qnos[i] = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		namestrcpy(&known_names[i], TextDatumGetCString(SPI_getbinval(tup, desc, 2, &isnull)));
		known_retentions[i] = *DatumGetIntervalP(SPI_getbinval(tup, desc, 3, &isnull));
	}
	if (old_qnos != NULL)
	{
		forget_changed_archives(nold, old_qnos, old_retentions);
		pfree(old_qnos);
		pfree(old_retentions);
	}
	WorkerLearnConfig();
	queues_read = changes;
}

/*
 * One transaction of an upkeep pass begins: with the lock timeout that
 * keeps one queue's locked tables from stalling the others.  False, with
 * no transaction open, if the extension is gone.
 */
static bool
upkeep_xact_begin(void)
{
	if (!WorkerPassBegin("queue: upkeep"))
		return false;
	(void) set_config_option("lock_timeout", psprintf("%d", queue_upkeep_lock_timeout),
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
	return true;
}

/*
 * One transaction of an upkeep pass ends: the batch leases of the queues
 * it visited (indexes into known_qnos) end after all the rest, since the
 * rows they lock must not be held while the rest waits for something, and
 * it commits.
 */
static void
upkeep_xact_end(const int *visited, int nvisited)
{
	for (int v = 0; v < nvisited; v++)
	{
		UpkeepStatus status;

		Oid			owner = queue_owner(visited[v]);

		if (!OidIsValid(owner))
			continue;
		(void) upkeep_queue(known_qnos[visited[v]], owner, false, true,
							"SELECT queue._end_leases(c) FROM queue.queue_config c WHERE c.qno = $1",
							&status);
	}
	WorkerPassEnd();
}

/*
 * Whether queue qno may have running jobs to orphan: unless its counts in
 * shared memory are known and show none.  A job under a batch lease counts
 * as running.
 */
static bool
may_have_running(int32 qno)
{
	int64		counts[JS_NSTATES];
	uint64		gen;

	return !QueueCountsGet(qno, counts, &gen) || counts[JS_RUNNING] != 0;
}

/*
 * Whether a cleanup must look at queue qno's archive ring: unless shared
 * memory knows it has no work before a later time (forgotten when a job
 * is archived, or the queue's retention changes).
 */
static bool
archive_may_have_work(int32 qno, TimestampTz now_ts)
{
	TimestampTz next;
	uint64		gen;

	return !QueueArchiveNextGet(qno, &next, &gen) || next <= now_ts;
}

/*
 * Whether queue i of known_qnos needs upkeep now; if not, *next learns
 * when it does.  *due and *due_gen are its due time in shared memory and
 * that time's generation, read before the tick takes its snapshot.
 */
static bool
queue_due_now(int i, bool orphans, bool cleanup, TimestampTz now_ts,
			  TimestampTz *due, uint64 *due_gen, bool *due_now, TimestampTz *next)
{
	int32		qno = known_qnos[i];
	TimestampTz grace_start = now_ts - WAITERS_GRACE_MS * INT64CONST(1000);

	*due = 0;
	*due_now = !QueueDueGet(qno, due, due_gen) || *due <= now_ts ||
		(orphans && *due != DT_NOEND && may_have_running(qno));
	if (!orphans && *due != 0 && *due != DT_NOEND && *due > grace_start &&
		QueueWaitersPresent(qno, grace_start))
	{
		*due += WAITERS_GRACE_MS * INT64CONST(1000);
		*due_now = false;
	}
	if (!*due_now && !(cleanup && archive_may_have_work(qno, now_ts)))
	{
		note_next(next, *due);
		return false;
	}
	return true;
}

/*
 * Upkeep of the queues that need it: expired leases and orphans, due
 * scheduled jobs, and (with cleanup) archived jobs past retention.  Each
 * queue's next due time is kept in shared memory, so a pass only visits
 * queues whose time has come; with orphans (checked at every cleanup
 * too, in case an earlier look failed) also those that may have running
 * jobs, and with cleanup those whose archive ring may have a segment to
 * empty or to turn to.  A queue with running jobs always has a due time
 * (the earliest lease), so one known to have none (DT_NOEND), or whose
 * counts show none, has no running job to orphan.  A visit costs about a
 * millisecond, so an idle queue must cost none: every sweep visiting
 * every queue made a worker beside 1,000 idle queues use 9% of a core.
 * The pass commits after every QUEUES_PER_XACT queues it tried.  Sets
 * *next to the earliest time something falls due again (0 if nothing is
 * known).  False if the extension is gone.
 */
bool
WorkerUpkeep(bool orphans, bool cleanup, TimestampTz *next)
{
	TimestampTz now_ts = GetCurrentTimestamp();
	static int	cleanups = 0;
	int			visited[QUEUES_PER_XACT] = {0};
	int			nvisited = 0;
	int			ntried = 0;

	*next = 0;
	if (!upkeep_xact_begin())
		return false;
	read_queues(cleanup && ++cleanups % REREAD_CLEANUPS == 1);

	for (int i = 0; i < nknown; i++)
	{
		TimestampTz due;
		uint64		due_gen;
		bool		due_now;
		TimestampTz queue_next;
		UpkeepStatus status;
		Oid			owner;

		if (!queue_due_now(i, orphans, cleanup, now_ts, &due, &due_gen, &due_now, next))
			continue;
		owner = queue_owner(i);
		if (!OidIsValid(owner))
			continue;			/* dropped: the list is read again next pass */
		if (ntried == QUEUES_PER_XACT)
		{
			upkeep_xact_end(visited, nvisited);
			forget_caches_if_large(ntried);
			nvisited = ntried = 0;
			if (ShutdownRequestPending)
				return true;
			if (!upkeep_xact_begin())
				return false;
		}
		ntried++;
		queue_next = upkeep_queue(known_qnos[i], owner, cleanup, due_now,
								  "SELECT t.next_due FROM queue.queue_config c,"
								  " LATERAL queue._tick_queue(c, cleanup => $2) t"
								  " WHERE c.qno = $1",
								  &status);
		if (status == UPKEEP_FAILED)
			continue;			/* its due time is past: not before the naptime */
		if (status == UPKEEP_SKIPPED)
		{
			note_next(next, due);
			continue;
		}
		visited[nvisited++] = i;
		if (queue_next == 0)
			queue_next = DT_NOEND;

		/*
		 * Claims waiting on the queue sleep until its due time, or to their
		 * deadline while it is past: a new one is theirs to wake for (see
		 * claim_sleep in ops/claim.c).
		 */
		if (QueueDueSet(known_qnos[i], queue_next, due_gen, false))
			QueueSignalDue(known_qnos[i]);
		note_next(next, queue_next);
	}
	upkeep_xact_end(visited, nvisited);
	forget_caches_if_large(ntried);
	return true;
}
