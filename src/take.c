/*-------------------------------------------------------------------------
 *
 * take.c
 *	  Claiming jobs without the executor.
 *
 * A claim takes the first ready jobs in claim order that nobody else is
 * taking: inside a transaction block it deletes them (they are held in
 * memory until commit, see held.c); as a transaction of its own it marks
 * them running in place (see claim.c).  Through SPI either is a DELETE or
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
 * Tables the executor must handle (see insert.c) fall back to SPI, as does
 * a queue whose ready index was changed by hand.
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

#include "direct.h"

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
 * Claim up to want ready jobs of q as the claim plan which (one of
 * PLAN_CLAIM_*) would with its arguments args: deleting them, or marking
 * them running if in_place (as PLAN_LEASE_* would), or, for a claim that
 * takes a batch lease (lc->on), locking them.  Calls emit with each job's
 * HELD_* columns as the claim leaves them (or, under a batch lease, as
 * they would be if marked running), in claim order.  Returns the number
 * claimed, or -1, having done nothing, if the table needs SPI.
 */
int
QueueTakeJobs(QueueInfo *q, QueuePlanId which, bool in_place, const Datum *args, int want,
			  QueueLeaseClaim *lc, QueueClaimEmit emit, void *arg)
{
	LWLock	   *lease_lock = lc->track ? QueueLeaseLock(q->qno) : NULL;
	QueueDirectScan ds;
	QueueInsertState *st;
	ScanKeyData keys[2];
	int			nkeys = 0;
	TupleTableSlot *old;
	TupleTableSlot *new;
	Datum		lease_until;
	int			natts;
	int			taken = 0;
	bool		skipped = false;

	if (which == PLAN_CLAIM_AT)
	{
		ScanKeyInit(&keys[nkeys++], 1, BTEqualStrategyNumber, F_INT4EQ, args[5]);
		ScanKeyInit(&keys[nkeys++], 2, BTGreaterEqualStrategyNumber, F_INT8GE, args[6]);
	}
	else if (which == PLAN_CLAIM_BELOW)
		ScanKeyInit(&keys[nkeys++], 1, BTLessStrategyNumber, F_INT4LT, args[5]);
	else
		Assert(which == PLAN_CLAIM_FRONT);

	if (!QueueDirectScanBegin(&ds, q, in_place ? CMD_UPDATE : CMD_DELETE, false, nkeys))
		return -1;
	index_rescan(ds.scan, keys, nkeys, NULL, 0);
	st = ds.st;
	old = st->scan_slot;
	new = st->slot;
	natts = new->tts_tupleDescriptor->natts;
	lease_until = DirectFunctionCall2(timestamptz_pl_interval, args[4], args[0]);

	while (taken < want && index_getnext_slot(ds.scan, ForwardScanDirection, old))
	{
		TM_FailureData tmfd;
		LockTupleMode lockmode;
		bool		update_indexes;
		TM_Result	result;
		Datum		values[HELD_NCOLS];
		bool		nulls[HELD_NCOLS];
		bool		batch;

#define COL(c) (st->claim_attnums[c] - 1)
#define SET(c, datum) \
	(new->tts_values[COL(c)] = (datum), new->tts_isnull[COL(c)] = false)

		slot_getallattrs(old);
		if (old->tts_isnull[COL(CC_STATE)] ||
			old->tts_values[COL(CC_STATE)] != st->states[QS_READY])
			continue;

		ExecClearTuple(new);
		memcpy(new->tts_values, old->tts_values, sizeof(Datum) * natts);
		memcpy(new->tts_isnull, old->tts_isnull, sizeof(bool) * natts);
		SET(CC_STATE, st->states[QS_RUNNING]);
		SET(CC_ATTEMPT, Int32GetDatum(DatumGetInt32(old->tts_values[COL(CC_ATTEMPT)]) + 1));
		SET(CC_LEASE_UNTIL, lease_until);
		SET(CC_CLAIMED_AT, args[4]);
		SET(CC_OWNER_PID, args[2]);
		SET(CC_OWNER_START, args[3]);
		ExecStoreVirtualTuple(new);

		/*
		 * A job of a batch lease (lease.c) is only locked, and its lease
		 * noted; a job in a group is always marked running, since the
		 * group's order is kept by its rows.
		 */
		batch = old->tts_isnull[COL(CC_GROUP_KEY)] &&
			QueueLeaseMayBatch(lc, DatumGetInt64(old->tts_values[COL(CC_ID)]));

		/*
		 * A ready row may be under a batch lease: checking that and taking
		 * the row must be one step against batch claims adding leases.
		 */
		if (lease_lock != NULL)
		{
			LWLockAcquire(lease_lock, LW_SHARED);
			if (QueueLeaseHeldLocked(q->qno, DatumGetInt64(old->tts_values[COL(CC_ID)])))
			{
				LWLockRelease(lease_lock);
				continue;
			}
		}

		/*
		 * Without waiting; but a row only we lock is ours to take, and
		 * waiting for it is no wait.
		 */
		update_indexes = false;
		for (bool wait = false;; wait = true)
		{
			if (batch)
				result = table_tuple_lock(ds.rel, &old->tts_tid, ds.snap, st->lock_slot, ds.cid,
										  LockTupleExclusive, LockWaitSkip, 0, &tmfd);
			else if (in_place)
				result = table_tuple_update(ds.rel, &old->tts_tid, new, ds.cid, ds.snap,
											InvalidSnapshot, wait, &tmfd, &lockmode, &update_indexes);
			else
				result = table_tuple_delete(ds.rel, &old->tts_tid, ds.cid, ds.snap,
											InvalidSnapshot, wait, &tmfd, false);
			if (wait || result != TM_BeingModified || !locked_by_us(old))
				break;
		}
		if (lease_lock != NULL)
			LWLockRelease(lease_lock);
		if (result == TM_Ok && batch)
			QueueLeaseStage(lc, DatumGetInt64(old->tts_values[COL(CC_ID)]), &old->tts_tid,
							DatumGetInt32(old->tts_values[COL(CC_ATTEMPT)]));
		if (result != TM_Ok)
		{
			/* someone else's: see the header comment */
			if (!skipped)
				QueueCursorSkipped(q->qno, DatumGetInt32(old->tts_values[COL(CC_PRIORITY)]),
								   DatumGetInt64(old->tts_values[COL(CC_RANK)]),
								   DatumGetTimestampTz(args[4]));
			skipped = true;
			continue;
		}
		if (in_place && update_indexes)
			QueueDirectIndexEntries(st, ds.rel, &new, 1, true);

		for (int c = 0; c < HELD_NCOLS; c++)
		{
			values[c] = new->tts_values[COL(c)];
			nulls[c] = new->tts_isnull[COL(c)];
		}
		emit(arg, values, nulls);
		taken++;
#undef SET
#undef COL
	}

	QueueDirectScanEnd(&ds);
	QueueLeaseFlush(lc);
	return taken;
}
