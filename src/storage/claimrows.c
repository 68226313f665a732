/*-------------------------------------------------------------------------
 *
 * claimrows.c
 *	  Claiming jobs without the executor.
 *
 * A claim takes the first ready jobs in claim order that nobody else is
 * taking: inside a transaction block it deletes them (they are held in
 * memory until commit, see xact/held.c); as a transaction of its own it
 * marks them running in place, or locks them into one batch lease
 * (xact/leases.c).  Through SPI either is a DELETE or
 * UPDATE of the rows a subquery locked with FOR UPDATE SKIP LOCKED: each
 * job costs a row lock (with its WAL record), a second lookup by id, and
 * the executor's work per row.  Here the ready index is scanned from the
 * cursor and each job is deleted or updated directly, without waiting:
 * the heap refuses a row another transaction is changing or has changed
 * since our snapshot, which is exactly the row SKIP LOCKED passes over.
 * Such a row is being claimed by someone else, whose rollback lowers the
 * cursor again; if the row's holder is not a claim, the cursor is lowered
 * to it a little later (QueueCursorSkipped), so skipping it loses nothing.
 *
 * A ready row may be under a batch lease: its entry in shared memory
 * (shmem/leasemap.c) lists the row's attempt.  Checking that and taking
 * the row are one step against batch claims adding entries, under the
 * queue's lease lock.
 *
 * Tables the executor must handle (see storage/direct.c) fall back to
 * SPI, as does a queue whose ready index was changed by hand.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/multixact.h"
#include "access/stratnum.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "base/job.h"
#include "shmem/leasemap.h"
#include "shmem/queuestate.h"
#include "storage/claimrows.h"
#include "storage/direct.h"

/*
 * Whether the row in slot, which the heap just refused as being modified,
 * is only locked by this transaction: a job queue.release() or
 * queue.reschedule() locked and made ready, perhaps in a subtransaction.
 */
static bool
locked_by_us(TupleTableSlot *slot)
{
	BufferHeapTupleTableSlot *bslot = (BufferHeapTupleTableSlot *) slot;
	uint16		infomask;
	TransactionId xmax;
	MultiXactMember *members;
	int			n;
	bool		ours = true;

	if (!TTS_IS_BUFFERTUPLE(slot))
		return false;
	LockBuffer(bslot->buffer, BUFFER_LOCK_SHARE);
	infomask = bslot->base.tuple->t_data->t_infomask;
	xmax = HeapTupleHeaderGetRawXmax(bslot->base.tuple->t_data);
	LockBuffer(bslot->buffer, BUFFER_LOCK_UNLOCK);

	if ((infomask & HEAP_XMAX_IS_MULTI) == 0)
		return TransactionIdIsCurrentTransactionId(xmax);
	n = GetMultiXactIdMembers(xmax, &members, false, HEAP_XMAX_IS_LOCKED_ONLY(infomask));
	for (int i = 0; i < n && ours; i++)
		ours = TransactionIdIsCurrentTransactionId(members[i].xid) ||
			!TransactionIdIsInProgress(members[i].xid);
	if (n > 0)
		pfree(members);
	return ours;
}

/*
 * Take the row of the job in old (already locked, deleted or updated to
 * new), without waiting; but a row only we lock is ours to take, and
 * waiting for it is no wait.  *update_indexes: whether an update needs new
 * index entries.
 */
static TM_Result
take_row(QueueDirectScan *ds, TupleTableSlot *old, TupleTableSlot *new, bool batch, bool in_place,
		 bool *update_indexes)
{
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	TM_Result	result;

	*update_indexes = false;
	for (bool wait = false;; wait = true)
	{
		if (batch)
			result = table_tuple_lock(ds->rel, &old->tts_tid, ds->snap, ds->st->lock_slot, ds->cid,
									  LockTupleExclusive, LockWaitSkip, 0, &tmfd);
		else if (in_place)
			result = table_tuple_update(ds->rel, &old->tts_tid, new, ds->cid, ds->snap,
										InvalidSnapshot, wait, &tmfd, &lockmode, update_indexes);
		else
			result = table_tuple_delete(ds->rel, &old->tts_tid, ds->cid, ds->snap,
										InvalidSnapshot, wait, &tmfd, false);
		if (wait || result != TM_BeingModified || !locked_by_us(old))
			return result;
	}
}

/* The running row a claim makes of the ready row in old, in new. */
static void
running_row(QueueDirectState *st, TupleTableSlot *old, TupleTableSlot *new, const Datum *args,
			Datum lease_until)
{
	int			natts = new->tts_tupleDescriptor->natts;

	ExecClearTuple(new);
	memcpy(new->tts_values, old->tts_values, sizeof(Datum) * natts);
	memcpy(new->tts_isnull, old->tts_isnull, sizeof(bool) * natts);
#define SET(c, datum) \
	(new->tts_values[st->attnums[c] - 1] = (datum), new->tts_isnull[st->attnums[c] - 1] = false)
	SET(JC_STATE, st->states[JS_RUNNING]);
	SET(JC_ATTEMPT, Int32GetDatum(DatumGetInt32(old->tts_values[st->attnums[JC_ATTEMPT] - 1]) + 1));
	SET(JC_LEASE_UNTIL, lease_until);
	SET(JC_CLAIMED_AT, args[4]);
	SET(JC_OWNER_PID, args[2]);
	SET(JC_OWNER_START, args[3]);
#undef SET
	ExecStoreVirtualTuple(new);
}

/* Begin the scan of the claim plan which (one of PLAN_CLAIM_*), from its keys. */
static bool
scan_begin(QueueDirectScan *ds, QueueInfo *q, QueuePlanId which, bool in_place, const Datum *args)
{
	ScanKeyData keys[2];
	int			nkeys = 0;

	if (which == PLAN_CLAIM_AT)
	{
		ScanKeyInit(&keys[nkeys++], 1, BTEqualStrategyNumber, F_INT4EQ, args[5]);
		ScanKeyInit(&keys[nkeys++], 2, BTGreaterEqualStrategyNumber, F_INT8GE, args[6]);
	}
	else if (which == PLAN_CLAIM_BELOW)
		ScanKeyInit(&keys[nkeys++], 1, BTLessStrategyNumber, F_INT4LT, args[5]);
	else
		Assert(which == PLAN_CLAIM_FRONT);
	if (!QueueDirectScanBegin(ds, q, in_place ? CMD_UPDATE : CMD_DELETE, false, nkeys))
		return false;
	index_rescan(ds->scan, keys, nkeys, NULL, 0);
	return true;
}

/*
 * Claim up to want ready jobs of q as the claim plan which (one of
 * PLAN_CLAIM_*) would with its arguments args: deleting them, or marking
 * them running if in_place (as PLAN_LEASE_* would), or, for a claim that
 * takes a batch lease (batch, with room), locking them into the batch.
 * With check_leases, rows under batch leases are passed over.  Calls emit
 * with each job's carried columns as the claim leaves them (or, in the
 * batch, as they would be if marked running), in claim order.  Returns
 * the number claimed, or -1, having done nothing, if the table needs SPI.
 */
int
QueueClaimRows(QueueInfo *q, QueuePlanId which, bool in_place, const Datum *args, int want,
			   bool check_leases, QueueClaimBatch *batch, QueueClaimEmit emit, void *arg)
{
	LWLock	   *lease_lock = check_leases ? LeaseMapQueueLock(q->qno) : NULL;
	QueueDirectScan ds;
	QueueDirectState *st;
	TupleTableSlot *old;
	TupleTableSlot *new;
	Datum		lease_until;
	int			taken = 0;
	bool		skipped = false;

	if (!scan_begin(&ds, q, which, in_place, args))
		return -1;
	st = ds.st;
	old = st->scan_slot;
	new = st->slot;
	lease_until = DirectFunctionCall2(timestamptz_pl_interval, args[4], args[0]);

	while (taken < want && index_getnext_slot(ds.scan, ForwardScanDirection, old))
	{
		Datum		values[JOB_NCARRIED];
		bool		nulls[JOB_NCARRIED];
		int64		id;
		int32		attempt;
		bool		to_batch;
		bool		update_indexes;
		TM_Result	result;

#define COL(c) (st->attnums[c] - 1)
		slot_getallattrs(old);
		if (old->tts_isnull[COL(JC_STATE)] ||
			old->tts_values[COL(JC_STATE)] != st->states[JS_READY])
			continue;
		id = DatumGetInt64(old->tts_values[COL(JC_ID)]);
		attempt = DatumGetInt32(old->tts_values[COL(JC_ATTEMPT)]);
		running_row(st, old, new, args, lease_until);

		/*
		 * A job of a batch lease is only locked; a job in a group is always
		 * marked running, since the group's order is kept by its rows.
		 */
		to_batch = batch != NULL && batch->n < batch->room && old->tts_isnull[COL(JC_GROUP_KEY)];
		if (lease_lock != NULL)
		{
			bool		any;

			LWLockAcquire(lease_lock, LW_SHARED);
			if (LeaseMapIsLeased(q->qno, id, attempt, &any))
			{
				LWLockRelease(lease_lock);
				continue;
			}
			/* an entry of a lease the row left: its entry goes at commit */
			to_batch &= !any;
		}
		result = take_row(&ds, old, new, to_batch, in_place, &update_indexes);
		if (lease_lock != NULL)
			LWLockRelease(lease_lock);
		if (result != TM_Ok)
		{
			/* someone else's: see the header comment */
			if (!skipped)
				QueueCursorSkipped(q->qno, DatumGetInt32(old->tts_values[COL(JC_PRIORITY)]),
								   DatumGetInt64(old->tts_values[COL(JC_RANK)]),
								   DatumGetTimestampTz(args[4]));
			skipped = true;
			continue;
		}
		if (to_batch)
		{
			batch->ids[batch->n] = id;
			batch->tids[batch->n] = old->tts_tid;
			batch->attempts[batch->n++] = attempt;
		}
		if (in_place && update_indexes)
			QueueDirectIndexEntries(st, ds.rel, &new, 1, true);

		for (int c = 0; c < JOB_NCARRIED; c++)
		{
			values[c] = new->tts_values[COL(c)];
			nulls[c] = new->tts_isnull[COL(c)];
		}
		emit(arg, values, nulls);
		taken++;
#undef COL
	}
	QueueDirectScanEnd(&ds);
	return taken;
}
