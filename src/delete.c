/*-------------------------------------------------------------------------
 *
 * delete.c
 *	  Completing running jobs without the executor.
 *
 * A complete of jobs claimed by earlier transactions (the leased way of
 * consuming) deletes their rows.  A job under a batch lease (lease.c) is
 * found where the claim left it, without the primary key.  Through SPI that is a DELETE ... WHERE
 * id = ANY ($1) RETURNING the row, with the executor's per-row work and a
 * copy of every row into SPI's result.  Here each id is looked up in the
 * primary key and its row deleted with the table AM, waiting for a
 * transaction that is changing it, as DELETE does.  When that transaction
 * changed the row (an extend, or the worker returning an expired lease),
 * DELETE would look at the new version and decide again; we leave those
 * ids to the caller, who completes them through SPI.
 *
 * The state (and the conditions under which a table needs SPI) is
 * insert.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "storage/bufmgr.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/timestamp.h"

#include "direct.h"

static int
compare_ids(const void *a, const void *b)
{
	int64		x = DatumGetInt64(*(const Datum *) a);
	int64		y = DatumGetInt64(*(const Datum *) b);

	return (x > y) - (x < y);
}

/*
 * Delete the running jobs of q among ids[0..n-1] (of the given attempt, if
 * has_token).  The HELD_* columns of each job deleted go to values[] and
 * nulls[] (room for n rows; each row's arrays are allocated here, the
 * values copied), and the ids that someone changed while we waited to
 * retry[] (room for n): the caller completes those through SPI.  Returns
 * the number deleted, or -1, having done nothing, if the table needs SPI.
 */
int
QueueDeleteRunning(QueueInfo *q, const Datum *ids, int n, bool has_token, int32 token,
				   Datum **values, bool **nulls, Datum *retry, int *nretry)
{
	QueueDirectScan ds;
	QueueInsertState *st;
	TupleTableSlot *slot;
	Datum	   *sorted;
	int			done = 0;
	bool		track = QueueLeaseTracking(q);
	QueueLeased *leases = palloc(sizeof(QueueLeased) * n);
	bool	   *leased = palloc0(sizeof(bool) * n);
	BlockNumber nblocks;

	*nretry = 0;

	/* in id order, each once, as an index scan of id = ANY ($1) would */
	sorted = palloc(sizeof(Datum) * n);
	memcpy(sorted, ids, sizeof(Datum) * n);
	qsort(sorted, n, sizeof(Datum), compare_ids);

	/* jobs under batch leases (lease.c) */
	for (int i = 0; track && i < n; i++)
		leased[i] = (i == 0 || sorted[i] != sorted[i - 1]) &&
			QueueLeaseFind(q, DatumGetInt64(sorted[i]), &leases[i]);

	if (!QueueDirectScanBegin(&ds, q, CMD_DELETE, true, 1))
		return -1;
	st = ds.st;
	slot = st->scan_slot;
	nblocks = InvalidBlockNumber;	/* looked up at the first leased job */

	for (int i = 0; i < n; i++)
	{
		ScanKeyData key;
		TM_FailureData tmfd;
		TM_Result	result;
		QueueLeased *lease = &leases[i];
		bool		isnull;
		bool		direct;
		int32		attempt;

#define COL(c) (st->claim_attnums[c] - 1)
		if (i > 0 && sorted[i] == sorted[i - 1])
			continue;

		/*
		 * A job under a batch lease is a ready row where the claim found it
		 * (unless the table was rewritten since); its attempt is the row's
		 * next.
		 */
		if (leased[i] && nblocks == InvalidBlockNumber)
			nblocks = RelationGetNumberOfBlocks(ds.rel);
		direct = leased[i] && ItemPointerIsValid(&lease->tid) &&
			ItemPointerGetBlockNumber(&lease->tid) < nblocks &&
			table_tuple_fetch_row_version(ds.rel, &lease->tid, ds.snap, slot) &&
			slot_getattr(slot, st->claim_attnums[CC_ID], &isnull) == sorted[i];
		if (!direct)
		{
			ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, sorted[i]);
			index_rescan(ds.scan, &key, 1, NULL, 0);
			if (!index_getnext_slot(ds.scan, ForwardScanDirection, slot))
				continue;
		}
		slot_getallattrs(slot);
		/* written since it was leased (its attempt moved on): the lease ended */
		if (leased[i] && DatumGetInt32(slot->tts_values[COL(CC_ATTEMPT)]) != lease->attempt)
			leased[i] = false;
		if (!leased[i] && !slot->tts_isnull[COL(CC_STATE)] &&
			slot->tts_values[COL(CC_STATE)] == st->states[QS_READY])
		{
			/*
			 * A ready row our snapshot sees may have left a batch lease
			 * since, as a running row (queue._settle_leases): the statement
			 * looks again with a new snapshot.
			 */
			retry[(*nretry)++] = sorted[i];
			continue;
		}
		if (slot->tts_isnull[COL(CC_STATE)] ||
			slot->tts_values[COL(CC_STATE)] != st->states[leased[i] ? QS_READY : QS_RUNNING])
			continue;
		attempt = DatumGetInt32(slot->tts_values[COL(CC_ATTEMPT)]) + (leased[i] ? 1 : 0);
		if (has_token && attempt != token)
			continue;

		result = table_tuple_delete(ds.rel, &slot->tts_tid, ds.cid, ds.snap, InvalidSnapshot,
									true, &tmfd, false);
		if (result == TM_Updated ||
			(result == TM_Deleted && IsolationUsesXactSnapshot()))
		{
			/* DELETE decides on the new version, or raises the error */
			retry[(*nretry)++] = sorted[i];
			continue;
		}
		if (result != TM_Ok)
			continue;			/* someone else finished it */

		values[done] = palloc(sizeof(Datum) * HELD_NCOLS);
		nulls[done] = palloc(sizeof(bool) * HELD_NCOLS);
		for (int c = 0; c < HELD_NCOLS; c++)
		{
			Form_pg_attribute att = TupleDescAttr(slot->tts_tupleDescriptor, COL(c));

			nulls[done][c] = slot->tts_isnull[COL(c)];
			values[done][c] = nulls[done][c] ? (Datum) 0 :
				datumCopy(slot->tts_values[COL(c)], att->attbyval, att->attlen);
		}
		if (leased[i])
		{
			values[done][HELD_ATTEMPT] = Int32GetDatum(attempt);
			values[done][HELD_CLAIMED_AT] = TimestampTzGetDatum(lease->claimed_at);
			values[done][HELD_LEASE_UNTIL] = TimestampTzGetDatum(lease->lease_until);
			nulls[done][HELD_CLAIMED_AT] = nulls[done][HELD_LEASE_UNTIL] = false;
			QueueLeaseDone(q->qno, lease->lease, sorted[i]);
		}
		done++;
#undef COL
	}

	QueueDirectScanEnd(&ds);

	/*
	 * The leases whose last jobs these were go.  Their rows are locked
	 * after their jobs', as everywhere (lease.c): the worker, which locks
	 * a lease's row first, never waits for a job.
	 */
	for (int i = 0; i < n; i++)
	{
		bool		first = leased[i];

		for (int j = 0; j < i && first; j++)
			first = !leased[j] || leases[j].lease != leases[i].lease;
		if (first && QueueLeaseWouldEnd(leases[i].lease, 0))
			QueueLeaseEnd(q, leases[i].lease);
	}
	return done;
}
