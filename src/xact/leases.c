/*-------------------------------------------------------------------------
 *
 * leases.c
 *	  One lease for a whole batch: what a claim of many jobs in a
 *	  transaction of its own records instead of rewriting every row, and
 *	  what a transaction does to batch leases until it ends.
 *
 * Such a claim only locks each row (which undoes itself at commit), notes
 * the jobs in shared memory (shmem/leasemap.c), and inserts one row into
 * the queue's lease table, queue.l_<name>, naming them all.  The job rows
 * stay 'ready', and unchanged, until the jobs finish: marking each running
 * would cost a new row version, its index entries, all of it WAL, and
 * later a lookup by id to delete it.
 *
 * What is true on disk: a job is running under a batch lease when its row
 * is 'ready' at the attempt a lease row lists for it.  Whatever writes the
 * row ends the lease for that job: complete deletes it, fail, extend and
 * release first write it as the running row a claim of its own would have
 * left ("materialize"), and the worker returns the jobs of an expired or
 * orphaned lease.  A lease row itself is written only when the whole lease
 * ends (its last job finishes, or the worker returns it), and after the
 * rows of its jobs: the worker, which finds leases by their rows and so
 * locks those first, never waits for a row.  The views read it that way.
 *
 * What shared memory adds is speed and a guard: a claim that finds a ready
 * row must not take it if it is leased, and nothing on the row says so.
 * A batch claim locks each row before it adds its entry, and keeps the
 * lock until it commits, so a claim that looked before the entry was there
 * could only have taken the row before the lock, which the lock then
 * refuses.
 *
 * Entries of a transaction are added when it takes the jobs and made
 * final when it commits; it removes them at commit when its jobs finish,
 * and at abort when the claim is undone.  xact/xact.c runs our commit step
 * before xact/pending.c's, which lowers the claim cursor: a job whose
 * lease the worker ended is never skipped after the cursor has come back
 * to it.
 *
 * Management functions that act on ready rows (queue.purge) take the
 * queue's lease lock exclusively (xact/leaseload.c), which waits for batch
 * claims in flight and keeps new ones from starting: they then go per row.
 * A single job is checked after its row is locked (queue._leased).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/lockdefs.h"
#include "utils/array.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/errors.h"
#include "base/jobid.h"
#include "base/role.h"
#include "catalog/acl.h"
#include "catalog/plans.h"
#include "shmem/leasemap.h"
#include "shmem/queuestate.h"
#include "shmem/wakeups.h"
#include "xact/leaseload.h"
#include "xact/leases.h"

/*
 * What the transaction's own lease work must do when it ends.  CLAIMED: a
 * batch claim added entries (made final at commit, removed at abort, and
 * room it reserved but did not use given back either way).  DONE: a job
 * left its lease (completed, or written as a running row); DROPPED: a
 * whole lease ended (the worker, queue._settle_leases).  Both of those
 * remove entries at commit.  FORGET_DB: the extension is being dropped.
 */
typedef enum LeaseActionKind
{
	LA_CLAIMED,
	LA_DONE,
	LA_DROPPED,
	LA_FORGET_DB
} LeaseActionKind;

typedef struct LeaseAction
{
	LeaseActionKind kind;
	int			nest;
	int32		qno;
	int64		lease;
	bool		lease_gone;		/* DONE, DROPPED: the lease row was deleted too */
	bool		emptied;		/* DONE, DROPPED: at commit, left no job in the lease */
	int			reserved;		/* CLAIMED: room reserved for jobs, unused */
	bool		batch_reserved; /* CLAIMED: ... and for the lease's entry */
	bool		batch_made;		/* CLAIMED: its lease's entry exists */
	int			n;				/* ids */
	int			cap;
	int64	   *ids;
} LeaseAction;

static List *actions = NIL;

/*
 * Jobs this transaction took off their leases (completed, written as
 * running rows, or returned): their entries go only at commit, but to
 * this transaction they are no longer leased.  Keyed by id; the value is
 * the nesting level that did it.
 */
typedef struct LeftJob
{
	int64		id;
	int			nest;
} LeftJob;

static HTAB *left_jobs = NULL;

static void
note_left(int64 id)
{
	LeftJob    *e;
	bool		found;

	if (left_jobs == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(int64);
		ctl.entrysize = sizeof(LeftJob);
		ctl.hcxt = TopTransactionContext;
		left_jobs = hash_create("queue jobs off their leases", 64, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	e = hash_search(left_jobs, &id, HASH_ENTER, &found);
	if (!found)
		e->nest = GetCurrentTransactionNestLevel();
}

static bool
has_left(int64 id)
{
	return left_jobs != NULL && hash_search(left_jobs, &id, HASH_FIND, NULL) != NULL;
}

static LeaseAction *
new_action(LeaseActionKind kind, int32 qno, int64 lease, int cap)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	LeaseAction *a = palloc0(sizeof(LeaseAction));

	a->kind = kind;
	a->nest = GetCurrentTransactionNestLevel();
	a->qno = qno;
	a->lease = lease;
	a->cap = Max(cap, 1);
	a->ids = palloc(sizeof(int64) * a->cap);
	actions = lappend(actions, a);
	MemoryContextSwitchTo(old);
	return a;
}

static void
action_add_id(LeaseAction *a, int64 id)
{
	if (a->n == a->cap)
	{
		a->cap *= 2;
		a->ids = repalloc(a->ids, sizeof(int64) * a->cap);
	}
	a->ids[a->n++] = id;
}

/*
 * Run one of the lease table's fixed statements (PLAN_LEASE_*) as the
 * table's owner.  The lease table is the queue's own bookkeeping: a role
 * that may claim and finish jobs need not be able to write it, as it need
 * not be able to read the claim cursor.  Returns SPI's result.
 */
static int
lease_statement(QueueInfo *q, QueuePlanId which, Datum *args, long count)
{
	Oid			relid = QueueLeaseTableRelid(q);
	QueueAsRole as;
	int			ret;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("lease table of queue \"%s\" is missing", q->name),
				 errhint("The queue's objects were changed by hand; drop and re-create the queue.")));
	QueueAsRoleInScopeBegin(&as, QueueRelOwner(relid, q->name));
	ret = SPI_execute_plan(QueueGetPlan(q, which), args, NULL, false, count);
	QueueAsRoleEnd(&as);
	return ret;
}

/* ---------------------------------------------------------------- claims */

/*
 * Whether a claim of want jobs of q may take a batch lease: in a
 * transaction of its own, for more than one job, with the role allowed to
 * draw from the queue's sequence, and nothing holding the queue's leases
 * still.  Must be called inside QueueSpiBegin.
 */
static bool
may_take_lease(QueueInfo *q, int want)
{
	Oid			relid;

	if (want < 2 || IsTransactionBlock() || IsolationIsSerializable() || q->max_running > 0)
		return false;

	/*
	 * The lease's id is drawn from the queue's sequence, as a job's is.
	 * Upkeep runs as the owner of the job table, and must be able to end
	 * the lease: a lease table given to someone else by hand takes none.
	 */
	relid = QueueLeaseTableRelid(q);
	if (!OidIsValid(relid) ||
		pg_class_aclcheck(QueueSeqRelid(q), GetUserId(), ACL_USAGE | ACL_UPDATE) != ACLCHECK_OK ||
		QueueRelOwner(relid, q->name) != QueueRelOwner(QueueTableRelid(q), q->name))
		return false;
	if (!QueueLeasesLock(q->qno, ShareLock, false))
		return false;

	/*
	 * A queue.alter() that gave the queue max_running (and ended its
	 * leases) may have committed since our copy of its settings was read:
	 * if anything changed, claim without a batch lease this time.
	 */
	AcceptInvalidationMessages();
	return !QueueCacheStale();
}

/*
 * Set up a claim of up to want jobs of q, leased until lease_until:
 * lc->on tells whether the claim takes a batch lease (may_take_lease, and
 * shared memory has room).  Otherwise the claim marks each job running.
 * Must be called inside QueueSpiBegin.
 */
void
QueueLeaseClaimBegin(QueueLeaseClaim *lc, QueueInfo *q, int want, TimestampTz claimed_at,
					 TimestampTz lease_until)
{
	LeaseAction *a;

	memset(lc, 0, sizeof(*lc));
	lc->q = q;
	lc->claimed_at = claimed_at;
	lc->lease_until = lease_until;
	lc->track = QueueLeaseTracking(q);
	if (!lc->track || !may_take_lease(q, want) || !LeaseMapReserve(want, 1))
		return;
	a = new_action(LA_CLAIMED, q->qno, 0, want);
	a->reserved = want;
	a->batch_reserved = true;
	lc->action = a;
	lc->batch.room = want;
	lc->batch.ids = palloc(sizeof(int64) * want);
	lc->batch.tids = palloc(sizeof(ItemPointerData) * want);
	lc->batch.attempts = palloc(sizeof(int32) * want);
	lc->on = true;
}

/*
 * Add the entries of the jobs the claim locked since it last published, so
 * that other claims pass over them: done under the queue's lease lock,
 * exclusively.  The first makes the lease.
 */
void
QueueLeaseClaimPublish(QueueLeaseClaim *lc)
{
	LeaseAction *a = lc->action;
	int			n = lc->batch.n - lc->published;

	if (!lc->on || n == 0)
		return;
	if (a->lease == 0)
		a->lease = JobIdMake(QueueNextSeq(lc->q), lc->q->qno);
	LWLockAcquire(LeaseMapQueueLock(lc->q->qno), LW_EXCLUSIVE);
	if (!a->batch_made)
	{
		LeaseBatch	b = {0};

		b.key.id = a->lease;
		b.xid = GetTopTransactionId();
		b.remaining = 0;
		b.claimed_at = lc->claimed_at;
		b.lease_until = lc->lease_until;
		b.owner_pid = MyProcPid;
		b.owner_start = MyStartTimestamp;
		(void) LeaseMapPutBatch(&b, true);
		a->batch_made = true;
		a->batch_reserved = false;
	}
	for (int i = lc->published; i < lc->batch.n; i++)
	{
		/* the row lock keeps anyone else from leasing it meanwhile */
		if (!LeaseMapAddJob(lc->batch.ids[i], a->lease, lc->batch.attempts[i], &lc->batch.tids[i]))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("job " INT64_FORMAT " of queue \"%s\" is under another batch lease already",
							lc->batch.ids[i], lc->q->name),
					 errdetail("The leases kept in shared memory disagree with the queue's lease table, queue.l_%s.",
							   lc->q->name),
					 errhint("The claim was rolled back; try it again.  If it recurs, a restart reloads the leases from queue.l_%s.",
							 lc->q->name)));
		/* counted as it goes, so that an abort undoes exactly this much */
		action_add_id(a, lc->batch.ids[i]);
		a->reserved--;
		lc->published = i + 1;
	}
	LWLockRelease(LeaseMapQueueLock(lc->q->qno));
	(void) LeaseMapBatchAdd(a->lease, n);
}

/*
 * The claim is over: write its lease row, and give back the room it did
 * not use.  Returns the number of jobs in the batch.
 */
int
QueueLeaseClaimEnd(QueueLeaseClaim *lc)
{
	LeaseAction *a = lc->action;
	Datum		args[7];
	Datum	   *ids;
	Datum	   *attempts;
	int			n = lc->batch.n;

	if (!lc->on)
		return 0;
	QueueLeaseClaimPublish(lc);
	LeaseMapUnreserve(a->reserved, a->batch_reserved ? 1 : 0);
	a->reserved = 0;
	a->batch_reserved = false;
	lc->on = false;
	if (n == 0)
		return 0;

	ids = palloc(sizeof(Datum) * n);
	attempts = palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
	{
		ids[i] = Int64GetDatum(lc->batch.ids[i]);
		attempts[i] = Int32GetDatum(lc->batch.attempts[i]);
	}
	args[0] = Int64GetDatum(a->lease);
	args[1] = TimestampTzGetDatum(lc->lease_until);
	args[2] = TimestampTzGetDatum(lc->claimed_at);
	args[3] = Int32GetDatum(MyProcPid);
	args[4] = TimestampTzGetDatum(MyStartTimestamp);
	args[5] = PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE));
	args[6] = PointerGetDatum(construct_array(attempts, n, INT4OID, sizeof(int32), true, TYPALIGN_INT));
	QueueCheckSpi(lease_statement(lc->q, PLAN_LEASE_INSERT, args, 0),
				  SPI_OK_INSERT, 1, "record a lease", lc->q->name);
	return n;
}

/* ---------------------------------------------------------------- ending leases */

/*
 * Whether job id of q is under a batch lease that the caller may act on:
 * committed, or taken by this transaction.  If so, fills *info.  The
 * caller made sure shared memory knows the queue's leases
 * (QueueLeaseTracking).
 */
bool
QueueLeaseFind(QueueInfo *q, int64 id, QueueLeased *info)
{
	LeasedJob	job;
	LeaseBatch	b;

	if (!LeaseMapQueueHasLeases(q->qno) || !LeaseMapFindJob(id, &job) || has_left(id) ||
		!LeaseMapGetBatch(job.lease, &b))
		return false;
	if (TransactionIdIsValid(b.xid) && !TransactionIdIsCurrentTransactionId(b.xid))
		return false;			/* not committed: nobody can have it yet */
	info->lease = job.lease;
	info->attempt = job.attempt;
	info->tid = job.tid;
	info->claimed_at = b.claimed_at;
	info->lease_until = b.lease_until;
	info->owner_pid = b.owner_pid;
	info->owner_start = b.owner_start;
	return true;
}

/*
 * Whether job id is under a batch lease, to this transaction; for the SQL
 * that acts on ready rows, which holds the job's row lock (or the queue's
 * leases), so that no claim is leasing it right now.
 */
bool
QueueLeaseIsLeased(QueueInfo *q, int64 id)
{
	return QueueLeaseTracking(q) && LeaseMapQueueHasLeases(q->qno) &&
		LeaseMapFindJob(id, NULL) && !has_left(id);
}

/* Job id left lease: its entry goes at commit. */
void
QueueLeaseDone(int32 qno, int64 lease, int64 id)
{
	LeaseAction *a = new_action(LA_DONE, qno, lease, 1);

	action_add_id(a, id);
	note_left(id);
}

/*
 * The lease's last job left it: delete its row, and its entry at commit.
 * Must be called inside QueueSpiBegin.
 */
void
QueueLeaseEnd(QueueInfo *q, int64 lease)
{
	Datum		arg = Int64GetDatum(lease);
	LeaseAction *a;

	QueueCheckSpi(lease_statement(q, PLAN_LEASE_DELETE, &arg, 1),
				  SPI_OK_DELETE, -1, "end a lease", q->name);
	a = new_action(LA_DONE, q->qno, lease, 1);
	a->lease_gone = true;
}

/*
 * Whether this transaction finishing n more jobs of lease (besides what it
 * finished already) leaves none of them.
 */
bool
QueueLeaseWouldEnd(int64 lease, int n)
{
	LeaseBatch	b;
	int			pending = 0;
	ListCell   *lc;

	foreach(lc, actions)
	{
		LeaseAction *a = (LeaseAction *) lfirst(lc);

		if (a->kind == LA_DONE && a->lease == lease)
			pending += a->n;
	}
	return LeaseMapGetBatch(lease, &b) && b.remaining - pending - n <= 0;
}

/*
 * Before fail, extend or release act on job id: if it is under a batch
 * lease, write it as the running row a claim of its own would have left.
 * Its attempt is then no longer the one the lease lists, which takes it
 * off the lease without touching the lease's row: a transaction that
 * fails one job of a batch and keeps going does not hold up the worker's
 * return of the others.  With a token that is not the job's, nothing
 * happens (the caller then finds the job is not its own).  Must be called
 * inside QueueSpiBegin.
 */
void
QueueLeaseMaterialize(QueueInfo *q, int64 id, bool has_token, int32 token)
{
	QueueLeased info;
	Datum		args[6];

	if (!QueueLeaseTracking(q) || !QueueLeaseFind(q, id, &info) ||
		(has_token && token != info.attempt + 1))
		return;
	args[0] = Int64GetDatum(id);
	args[1] = Int32GetDatum(info.attempt);
	args[2] = TimestampTzGetDatum(info.claimed_at);
	args[3] = TimestampTzGetDatum(info.lease_until);
	args[4] = Int32GetDatum(info.owner_pid);
	args[5] = TimestampTzGetDatum(info.owner_start);
	QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_LEASE_RUNNING), args, NULL, false, 1),
				  SPI_OK_UPDATE, -1, "mark a leased job running", q->name);
	if (SPI_processed == 0)
		return;					/* the worker returned it first */
	QueueLeaseDone(q->qno, info.lease, id);
	if (QueueLeaseWouldEnd(info.lease, 0))
		QueueLeaseEnd(q, info.lease);
}

/*
 * This transaction took the jobs ids of lease off it (deleting its row,
 * with lease_gone, or taking them off it) and wrote them: their entries go
 * at commit, and the lease's if its row is gone.
 */
void
QueueLeasesDropped(int32 qno, int64 lease, const int64 *ids, int n, bool lease_gone)
{
	LeaseAction *a;

	if (!LeaseMapActive())
		return;
	a = new_action(LA_DROPPED, qno, lease, n);
	a->lease_gone = lease_gone;
	for (int i = 0; i < n; i++)
		if (JobIdQueue(ids[i]) == qno)
		{
			action_add_id(a, ids[i]);
			note_left(ids[i]);
		}
}

/*
 * DROP EXTENSION queue (or DROP SCHEMA queue) in this transaction: at
 * commit, what shared memory holds of this database's queues goes, so
 * that queues made again (or restored from a dump) with the same numbers
 * start afresh.
 */
void
QueueLeaseDroppingExtension(void)
{
	(void) new_action(LA_FORGET_DB, 0, 0, 1);
}

/* ---------------------------------------------------------------- transaction end */

static void
action_abort(LeaseAction *a)
{
	if (a->kind != LA_CLAIMED)
		return;
	for (int i = 0; i < a->n; i++)
		(void) LeaseMapRemoveJob(a->ids[i], a->lease);
	if (a->batch_made)
		LeaseMapRemoveBatch(a->lease);
	LeaseMapUnreserve(a->reserved, a->batch_reserved ? 1 : 0);
}

/*
 * A lease this transaction left without jobs, but whose row stays (its
 * last jobs finished at once in two transactions, each leaving the row
 * to the other), is the worker's to delete (queue._ended_leases): wake
 * it.  A transaction that deleted the row itself has removed the entry
 * by now, and wakes no one.
 */
static void
wake_for_emptied(void)
{
	ListCell   *lc;
	LeaseBatch	b;
	TimestampTz now_ts = 0;

	foreach(lc, actions)
	{
		LeaseAction *a = (LeaseAction *) lfirst(lc);

		if (a->emptied && LeaseMapGetBatch(a->lease, &b))
		{
			if (now_ts == 0)
				now_ts = GetCurrentTimestamp();
			(void) QueueDueLower(a->qno, now_ts);
		}
	}
	if (now_ts != 0)
		QueueSignalScheduled(now_ts);
}

/* Remove the entries of a's jobs; returns how many were its lease's. */
static int
remove_jobs(LeaseAction *a)
{
	int			removed = 0;

	for (int i = 0; i < a->n; i++)
		if (LeaseMapRemoveJob(a->ids[i], a->lease))
			removed++;
	return removed;
}

static void
action_commit(LeaseAction *a)
{
	switch (a->kind)
	{
		case LA_CLAIMED:
			if (a->batch_made)
				LeaseMapBatchCommitted(a->lease);
			/* nothing was reserved past the claim's end */
			break;
		case LA_DONE:
			{
				int			removed = remove_jobs(a);

				/* (the action of a deleted row lists no jobs) */
				if (a->n > 0)
					a->emptied = LeaseMapBatchAdd(a->lease, -removed) == 0;
				if (a->lease_gone)
					LeaseMapRemoveBatch(a->lease);
			}
			break;
		case LA_DROPPED:
			{
				int			removed = remove_jobs(a);

				if (a->lease_gone)
					LeaseMapRemoveBatch(a->lease);
				else
					a->emptied = LeaseMapBatchAdd(a->lease, -removed) == 0;
			}
			break;
		case LA_FORGET_DB:
			LeaseMapForget(MyDatabaseId, 0);
			QueueStateForgetDatabase(MyDatabaseId);
			break;
	}
}

/* PREPARE: what it did to shared memory would be done by no one at COMMIT PREPARED. */
void
LeasesAtPrepare(void)
{
	if (actions == NIL)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 ((LeaseAction *) linitial(actions))->kind == LA_FORGET_DB && list_length(actions) == 1 ?
			 errmsg("cannot PREPARE a transaction that dropped extension queue") :
			 errmsg("cannot PREPARE a transaction that claimed or finished leased jobs"),
			 errhint("Commit it directly, or move the queue calls out of the prepared transaction.")));
}

/* The transaction ended (commit: committed); its memory goes with it. */
void
LeasesAtEnd(bool commit)
{
	ListCell   *lc;

	foreach(lc, actions)
	{
		if (commit)
			action_commit((LeaseAction *) lfirst(lc));
		else
			action_abort((LeaseAction *) lfirst(lc));
	}
	if (commit && actions != NIL)
		wake_for_emptied();
	actions = NIL;
	left_jobs = NULL;
}

/* A subtransaction at level nest ended. */
void
LeasesAtSubEnd(int nest, bool commit)
{
	ListCell   *lc;

	if (left_jobs != NULL)
	{
		HASH_SEQ_STATUS status;
		LeftJob    *e;

		hash_seq_init(&status, left_jobs);
		while ((e = hash_seq_search(&status)) != NULL)
			if (e->nest < nest)
				continue;
			else if (commit)
				e->nest = nest - 1;
			else
				hash_search(left_jobs, &e->id, HASH_REMOVE, NULL);
	}
	foreach(lc, actions)
	{
		LeaseAction *a = (LeaseAction *) lfirst(lc);

		if (a->nest < nest)
			continue;
		if (commit)
			a->nest = nest - 1;
		else
		{
			action_abort(a);
			actions = foreach_delete_current(actions, lc);
		}
	}
}
