/*-------------------------------------------------------------------------
 *
 * groups.c
 *	  Ordered groups (group_key) and the per-queue cap on running jobs
 *	  (max_running).
 *
 * Jobs with the same group_key start in id order, group_max_running of
 * them at a time (by default one).  Only a group's oldest unfinished jobs,
 * up to that many, are ever active (ready, scheduled or running); the jobs
 * behind them are 'waiting' and invisible to claims.  When an active job
 * finishes (or dies, or is cancelled), the oldest waiting one becomes
 * active with a fresh rank, at the back of the claim order: so claims
 * rotate over the groups that have work, and a group with a huge backlog
 * cannot hold up the others.  Claims need no group logic at all, so their cost
 * does not depend on how many groups there are.
 *
 * Deciding whether a new job is the head, and which job is next, must not
 * race: both happen under a lock taken until the end of the transaction.
 * It is an advisory-style lock with a field of its own (base/locktags.h),
 * so it never collides with users' advisory locks, on one of GROUP_LOCK_BUCKETS
 * buckets per queue that the group hashes to: a transaction enqueueing
 * into a million groups holds at most that many locks (one per group
 * would exhaust the lock table), and unrelated groups sharing a bucket
 * wait for each other only as long as one transaction.  They can also
 * deadlock, when two transactions each finish jobs of several groups one
 * call at a time: 4 consumers completing 10 jobs of 1,000 groups per
 * transaction one by one had 22 deadlocks in 20 s with 128 buckets and 5
 * in a drain of 40,000 jobs with 1,024; completing them with one call,
 * which locks its buckets in order, had none.  1,024 buckets are at most
 * a sixth of the default lock table.
 *
 * max_running: each running job of such a queue holds one row of the
 * queue's slot table (queue.s_<name>).  A claim must first lock free slots
 * with SKIP LOCKED, so concurrent claims never wait for each other, and the
 * cap holds whether claims commit before the work or with it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/errors.h"
#include "base/locktags.h"
#include "catalog/acl.h"
#include "catalog/plans.h"
#include "catalog/spi.h"
#include "ops/groups.h"
#include "xact/held.h"
#include "xact/pending.h"

#define GROUP_LOCK_BUCKETS		1024

static uint32
group_bucket(text *key)
{
	return hash_bytes((const unsigned char *) VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key)) %
		GROUP_LOCK_BUCKETS;
}

static void
lock_group(int32 qno, text *key)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) qno, group_bucket(key), QUEUE_LOCKTAG_GROUP);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/* queue._lock_group(qno, group_key), for the SQL management functions */
PG_FUNCTION_INFO_V1(queue_lock_group);
Datum
queue_lock_group(PG_FUNCTION_ARGS)
{
	QueueCheckWriter(PG_GETARG_INT32(0));
	lock_group(PG_GETARG_INT32(0), PG_GETARG_TEXT_PP(1));
	PG_RETURN_VOID();
}

/*
 * Run a group or slot statement.  What it decides must see every
 * transaction that held the group lock, or took or freed a slot, before
 * us: under REPEATABLE READ or SERIALIZABLE, whose snapshot may predate
 * them, it runs with the latest snapshot instead (as foreign key checks
 * do); a slot changed since would otherwise be a serialization failure.
 */
static int
exec_latest(QueueInfo *q, QueuePlanId which, Datum *args, long count)
{
	if (IsolationUsesXactSnapshot())
		return QueueExecuteLatest(QueueGetPlan(q, which), args, false, count);
	return SPI_execute_plan(QueueGetPlan(q, which), args, NULL, false, count);
}

/*
 * Lock the group and tell whether a new job must wait behind its jobs:
 * with group_max_running 1, whether it has an unfinished job; with n,
 * whether n of its jobs are active (ready, scheduled or running) or some
 * already wait, so that jobs start in id order.
 */
bool
QueueGroupBusy(QueueInfo *q, text *group_key)
{
	/* jobs this transaction claimed are not in the table until commit */
	int			free = q->group_max_running - QueueHeldInGroup(q->qno, group_key);
	Datum		args[2] = {PointerGetDatum(group_key), Int32GetDatum(free)};
	bool		isnull;

	lock_group(q->qno, group_key);
	if (free <= 0)
		return true;
	if (q->group_max_running == 1)
	{
		QueueCheckSpi(exec_latest(q, PLAN_GROUP_BUSY, args, 1), SPI_OK_SELECT, -1, "look up a group", q->name);
		return SPI_processed > 0;
	}
	QueueCheckSpi(exec_latest(q, PLAN_GROUP_BUSY_N, args, 1), SPI_OK_SELECT, 1, "look up a group", q->name);
	return DatumGetBool(QueuePlanValue(PLAN_GROUP_BUSY_N, 0, "busy", &isnull));
}

/*
 * Make the group's next waiting job active, if it has room for one;
 * returns whether it did (SPI's result holds the job).
 */
static bool
advance_one(QueueInfo *q, Datum group_key, TimestampTz now_ts)
{
	int			free = q->group_max_running - QueueHeldInGroup(q->qno, DatumGetTextPP(group_key));
	Datum		args[3] = {group_key, TimestampTzGetDatum(now_ts), Int32GetDatum(free)};

	if (free <= 0)
		return false;			/* its active jobs are ours, held until commit */
	QueueCheckSpi(exec_latest(q, PLAN_GROUP_ADVANCE, args, 1), SPI_OK_UPDATE_RETURNING, -1,
				  "advance a group", q->name);
	return SPI_processed == 1;
}

/* Lock order: by bucket, then by key (which also groups duplicates). */
static int
cmp_text_datum(const void *a, const void *b)
{
	text	   *x = DatumGetTextPP(*(const Datum *) a);
	text	   *y = DatumGetTextPP(*(const Datum *) b);
	uint32		bx = group_bucket(x);
	uint32		by = group_bucket(y);
	int			lx = VARSIZE_ANY_EXHDR(x);
	int			ly = VARSIZE_ANY_EXHDR(y);
	int			c;

	if (bx != by)
		return bx < by ? -1 : 1;
	c = memcmp(VARDATA_ANY(x), VARDATA_ANY(y), Min(lx, ly));
	return c != 0 ? c : (lx > ly) - (lx < ly);
}

/*
 * An active job of each of these groups finished (a key once per job):
 * make the group's next waiting job active.  With fill, as many as the
 * group has room for: jobs came in, or went, by other ways than one at a
 * time (a batch enqueue, alter raising group_max_running, the management
 * functions).  Buckets are locked in sorted order so that two
 * transactions finishing jobs of the same groups cannot deadlock.
 */
void
QueueGroupAdvance(QueueInfo *q, Datum *group_keys, int n, bool fill)
{
	Datum	   *sorted = palloc(sizeof(Datum) * n);

	/* lock in a fixed order, then advance in the caller's (job) order */
	memcpy(sorted, group_keys, sizeof(Datum) * n);
	qsort(sorted, n, sizeof(Datum), cmp_text_datum);
	for (int i = 0; i < n; i++)
		lock_group(q->qno, DatumGetTextPP(sorted[i]));
	pfree(sorted);

	for (int i = 0; i < n; i++)
	{
		TimestampTz now_ts = GetCurrentTimestamp();

		for (int moved = 0; moved < (fill ? q->group_max_running : 1) && advance_one(q, group_keys[i], now_ts);
			 moved++)
		{
			bool		isnull;
			TimestampTz run_at = DatumGetTimestampTz(QueuePlanValue(PLAN_GROUP_ADVANCE, 0, "run_at", &isnull));

			QueueXactCount(q->qno, JS_WAITING, run_at > now_ts ? JS_SCHEDULED : JS_READY, 1);
			if (run_at > now_ts)
				QueueXactScheduled(q->qno, run_at);
			else
				QueueXactMadeReady(q->qno, DatumGetInt32(QueuePlanValue(PLAN_GROUP_ADVANCE, 0, "priority", &isnull)),
								   DatumGetInt64(QueuePlanValue(PLAN_GROUP_ADVANCE, 0, "rank", &isnull)), 1);
		}
	}
}

/* queue._group_busy(qno, group_key), for queue.retry */
PG_FUNCTION_INFO_V1(queue_group_busy);
Datum
queue_group_busy(PG_FUNCTION_ARGS)
{
	QueueInfo  *q;
	bool		busy;

	QueueCheckWriter(PG_GETARG_INT32(0));
	QueueSpiBegin();
	q = QueueLookupByQno(PG_GETARG_INT32(0), false);
	busy = QueueGroupBusy(q, PG_GETARG_TEXT_PP(1));
	QueueSpiEnd();
	PG_RETURN_BOOL(busy);
}

/*
 * queue._advance_groups(qno, group_keys): the SQL management functions
 * removed jobs that may have been their groups' heads.
 */
PG_FUNCTION_INFO_V1(queue_advance_groups);
Datum
queue_advance_groups(PG_FUNCTION_ARGS)
{
	Datum	   *keys;
	bool	   *nulls;
	int			n;
	int			m = 0;
	QueueInfo  *q;

	QueueCheckWriter(PG_GETARG_INT32(0));
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), TEXTOID, -1, false, TYPALIGN_INT, &keys, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			keys[m++] = keys[i];
	QueueSpiBegin();
	q = QueueLookupByQno(PG_GETARG_INT32(0), false);
	if (m > 0)
		QueueGroupAdvance(q, keys, m, true);
	QueueSpiEnd();
	PG_RETURN_VOID();
}

/* Lock up to want free slots; returns how many, and their numbers. */
int
QueueSlotsTake(QueueInfo *q, int want, Datum **slots)
{
	Datum		args[2];

	args[0] = Int32GetDatum(q->max_running);
	args[1] = Int32GetDatum(want);
	QueueCheckSpi(exec_latest(q, PLAN_SLOTS_TAKE, args, 0),
					SPI_OK_SELECT, -1, "take running slots", q->name);
	*slots = palloc(sizeof(Datum) * Max(SPI_processed, 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		(*slots)[i] = QueuePlanValue(PLAN_SLOTS_TAKE, i, "slot", &isnull);
	}
	return (int) SPI_processed;
}

void
QueueSlotsAssign(QueueInfo *q, Datum *slots, Datum *ids, int n)
{
	Datum		args[2];

	if (n == 0)
		return;
	args[0] = PointerGetDatum(construct_array(slots, n, INT4OID, sizeof(int32), true, TYPALIGN_INT));
	args[1] = PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE));
	QueueCheckSpi(exec_latest(q, PLAN_SLOTS_ASSIGN, args, 0),
					SPI_OK_UPDATE, -1, "assign running slots", q->name);
}

/*
 * Free the slots of jobs that stopped running, if the queue has
 * max_running.  Slots numbered above max_running hold jobs that were
 * already running when the limit was set or lowered: such a job moves into
 * each slot freed within the limit, and its own slot goes away, so that
 * claims see free slots only once fewer than max_running jobs run.
 */
void
QueueSlotsFree(QueueInfo *q, Datum *ids, int n)
{
	Datum		args[2];

	if (n == 0)
		return;

	/*
	 * queue.alter() may have set or changed max_running since our copy of
	 * the settings was read.  It rebuilds the slot table from the running
	 * jobs it locks, so a job we finished after waiting for its row got a
	 * slot in the new table: free it, whatever our copy said.  The lookup
	 * takes in alter's change, the statement below sees alter's rows.
	 */
	q = QueueLookupByQno(q->qno, false);
	if (q->max_running <= 0)
		return;
	args[0] = PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE));
	args[1] = Int32GetDatum(q->max_running);
	QueueCheckSpi(exec_latest(q, PLAN_SLOTS_FREE, args, 0),
					SPI_OK_UPDATE_RETURNING, -1, "free running slots", q->name);
	if (SPI_processed > 0)
	{
		uint64		nfreed = SPI_processed;
		Datum	   *freed = palloc(sizeof(Datum) * nfreed);
		bool		isnull;

		/* claims that found no free slot sleep until we commit */
		QueueXactSlotsFreed(q->qno, (int64) nfreed);

		for (uint64 i = 0; i < nfreed; i++)
			freed[i] = QueuePlanValue(PLAN_SLOTS_FREE, i, "slot", &isnull);
		for (uint64 i = 0; i < nfreed; i++)
		{
			Datum		margs[2] = {args[1], freed[i]};

			QueueCheckSpi(exec_latest(q, PLAN_SLOTS_MIGRATE, margs, 0),
							SPI_OK_UPDATE, -1, "move running slots", q->name);
		}
	}
}

/* queue._free_slots(qno, ids): jobs stopped running in SQL code */
PG_FUNCTION_INFO_V1(queue_free_slots);
Datum
queue_free_slots(PG_FUNCTION_ARGS)
{
	Datum	   *ids;
	bool	   *nulls;
	int			n;
	QueueInfo  *q;

	QueueCheckWriter(PG_GETARG_INT32(0));
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
					  &ids, &nulls, &n);
	QueueSpiBegin();
	q = QueueLookupByQno(PG_GETARG_INT32(0), false);
	QueueSlotsFree(q, ids, n);
	QueueSpiEnd();
	PG_RETURN_VOID();
}
