/*-------------------------------------------------------------------------
 *
 * delete.c
 *	  Completing running jobs without the executor.
 *
 * A complete of jobs claimed by earlier transactions (the leased way of
 * consuming) deletes their rows.  A job under a batch lease
 * (xact/leases.c) is found where the claim left it, without the primary
 * key.  Through SPI that is a DELETE ... WHERE id = ANY ($1) RETURNING the
 * row, with the executor's per-row work and a copy of every row into SPI's
 * result.  Here each id is looked up in the primary key and its row
 * deleted with the table AM, waiting for a transaction that is changing
 * it, as DELETE does.  When that transaction changed the row (an extend,
 * or the worker returning an expired lease), DELETE would look at the new
 * version and decide again; we leave those ids to the caller, who
 * completes them through SPI.
 *
 * The state (and the conditions under which a table needs SPI) is
 * storage/direct.c's.
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

#include "base/job.h"
#include "storage/delete.h"
#include "storage/direct.h"

/*
 * Find job id's row into the scan's slot: where its batch lease says it
 * is (unless the table was rewritten since), else through the primary
 * key.  False if there is none.
 */
static bool
find_row(QueueDirectScan *ds, Datum id, const QueueLeased *lease, BlockNumber *nblocks)
{
	TupleTableSlot *slot = ds->st->scan_slot;
	ScanKeyData key;
	bool		isnull;

	if (lease->lease != 0 && ItemPointerIsValid(&lease->tid))
	{
		ItemPointerData tid = lease->tid;

		if (*nblocks == InvalidBlockNumber)
			*nblocks = RelationGetNumberOfBlocks(ds->rel);
		if (ItemPointerGetBlockNumber(&lease->tid) < *nblocks &&
			table_tuple_fetch_row_version(ds->rel, &tid, ds->snap, slot) &&
			slot_getattr(slot, ds->st->attnums[JC_ID], &isnull) == id)
			return true;
	}
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT8EQ, id);
	index_rescan(ds->scan, &key, 1, NULL, 0);
	return index_getnext_slot(ds->scan, ForwardScanDirection, slot);
}

/* Copy the carried columns of the row in slot, as the job finished. */
static void
copy_row(QueueDirectState *st, TupleTableSlot *slot, const QueueLeased *lease, int32 attempt,
		 Datum **values, bool **nulls)
{
	*values = palloc(sizeof(Datum) * JOB_NCARRIED);
	*nulls = palloc(sizeof(bool) * JOB_NCARRIED);
	for (int c = 0; c < JOB_NCARRIED; c++)
	{
		Form_pg_attribute att = TupleDescAttr(slot->tts_tupleDescriptor, st->attnums[c] - 1);

		(*nulls)[c] = slot->tts_isnull[st->attnums[c] - 1];
		(*values)[c] = (*nulls)[c] ? (Datum) 0 :
			datumCopy(slot->tts_values[st->attnums[c] - 1], att->attbyval, att->attlen);
	}
	if (lease != NULL)
	{
		/* as if the claim had marked it running */
		(*values)[JC_ATTEMPT] = Int32GetDatum(attempt);
		(*values)[JC_CLAIMED_AT] = TimestampTzGetDatum(lease->claimed_at);
		(*values)[JC_LEASE_UNTIL] = TimestampTzGetDatum(lease->lease_until);
		(*nulls)[JC_CLAIMED_AT] = (*nulls)[JC_LEASE_UNTIL] = false;
	}
}

/*
 * Delete the running jobs of q among ids[0..n-1], sorted and distinct (of
 * the given attempt, if has_token).  leases[i] says whether ids[i] is
 * under a batch lease (lease 0: no); leased_done[i] is set if it was and
 * its row is deleted.  The carried columns of each job deleted go to
 * values[] and nulls[] (room for n rows; each row's arrays are allocated
 * here, the values copied), and the ids that someone changed while we
 * waited to retry[] (room for n): the caller completes those through SPI.
 * Returns the number deleted, or -1, having done nothing, if the table
 * needs SPI.
 */
int
QueueDeleteRunning(QueueInfo *q, const Datum *ids, int n, const QueueLeased *leases,
				   bool has_token, int32 token, Datum **values, bool **nulls,
				   bool *leased_done, Datum *retry, int *nretry)
{
	QueueDirectScan ds;
	QueueDirectState *st;
	TupleTableSlot *slot;
	int			done = 0;
	BlockNumber nblocks = InvalidBlockNumber;	/* looked up at the first leased job */

	*nretry = 0;
	if (!QueueDirectScanBegin(&ds, q, CMD_DELETE, true, 1))
		return -1;
	st = ds.st;
	slot = st->scan_slot;

	for (int i = 0; i < n; i++)
	{
		TM_FailureData tmfd;
		TM_Result	result;
		bool		leased = leases[i].lease != 0;
		int32		attempt;

#define COL(c) (st->attnums[c] - 1)
		leased_done[i] = false;
		if (!find_row(&ds, ids[i], &leases[i], &nblocks))
			continue;
		slot_getallattrs(slot);
		/* written since it was leased (its attempt moved on): the lease ended */
		if (leased && DatumGetInt32(slot->tts_values[COL(JC_ATTEMPT)]) != leases[i].attempt)
			leased = false;
		if (!leased && !slot->tts_isnull[COL(JC_STATE)] &&
			slot->tts_values[COL(JC_STATE)] == st->states[JS_READY])
		{
			/*
			 * A ready row our snapshot sees may have left a batch lease
			 * since, as a running row (queue._settle_leases): the statement
			 * looks again with a new snapshot.
			 */
			retry[(*nretry)++] = ids[i];
			continue;
		}
		if (slot->tts_isnull[COL(JC_STATE)] ||
			slot->tts_values[COL(JC_STATE)] != st->states[leased ? JS_READY : JS_RUNNING])
			continue;
		attempt = DatumGetInt32(slot->tts_values[COL(JC_ATTEMPT)]) + (leased ? 1 : 0);
		if (has_token && attempt != token)
			continue;
#undef COL

		result = table_tuple_delete(ds.rel, &slot->tts_tid, ds.cid, ds.snap, InvalidSnapshot,
									true, &tmfd, false);
		if (result == TM_Updated ||
			(result == TM_Deleted && IsolationUsesXactSnapshot()))
		{
			/* DELETE decides on the new version, or raises the error */
			retry[(*nretry)++] = ids[i];
			continue;
		}
		if (result != TM_Ok)
			continue;			/* someone else finished it */
		copy_row(st, slot, leased ? &leases[i] : NULL, attempt, &values[done], &nulls[done]);
		leased_done[i] = leased;
		done++;
	}
	QueueDirectScanEnd(&ds);
	return done;
}
