/*-------------------------------------------------------------------------
 *
 * direct.h
 *	  What insert.c, take.c and delete.c share: the per-queue state for writing a
 *	  queue's rows without the executor.  Private to those two files.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_DIRECT_H
#define QUEUE_DIRECT_H

#include "executor/executor.h"

#include "queue.h"

#define MAX_COLS	16

/*
 * Columns of the hot table that a claim without the executor reads or sets
 * (take.c); the first HELD_NCOLS are in the order of the HELD_* columns.
 */
typedef enum ClaimCol
{
	CC_ID,
	CC_PAYLOAD,
	CC_ATTEMPT,
	CC_GROUP_KEY,
	CC_ENQUEUED_AT,
	CC_LEASE_UNTIL,
	CC_PRIORITY,
	CC_RANK,
	CC_RUN_AT,
	CC_DEDUP_KEY,
	CC_LAST_ERROR,
	CC_HISTORY,
	CC_UNCOUNTED,
	CC_CLAIMED_AT,
	CC_STATE,
	CC_OWNER_PID,
	CC_OWNER_START,
	CC_NCOLS
} ClaimCol;

StaticAssertDecl(CC_CLAIMED_AT == HELD_CLAIMED_AT && CC_STATE == HELD_NCOLS,
				 "ClaimCol must follow the HELD_* columns");

struct QueueInsertState
{
	Oid			relid;
	Oid			parentid;		/* archive: the queue's archive, relid its segment */
	bool		archive;		/* the archive table, not the hot one */
	bool		valid;
	MemoryContext cxt;
	EState	   *estate;			/* long-lived, for the compiled predicates */
	TupleTableSlot *slot;
	TupleTableSlot **slots;		/* archive: for table_multi_insert */
	int			nslots;
	AttrNumber	attnums[MAX_COLS];
	int			nindexes;
	Oid		   *indexoids;
	IndexInfo **indexinfos;
	ExprState **predicates;
	bool	   *claim_unchanged;	/* a claim leaves the index's keys as they are */
	Datum		states[QS_NSTATES]; /* enum values of queue.job_state */

	/* hot table only, for take.c and delete.c; InvalidOid if not possible */
	Oid			ready_index;	/* q_<name>$ready, scanned in claim order */
	Oid			pkey_index;		/* the unique btree on id (delete.c) */
	AttrNumber	claim_attnums[CC_NCOLS];
	TupleTableSlot *scan_slot;	/* the table's own slot type, for the scan */
	TupleTableSlot *lock_slot;	/* ... and for rows a batch claim locks */
};

/*
 * A scan of one of the hot table's indexes that changes the rows it finds,
 * as one SQL statement would (take.c, delete.c).
 */
typedef struct QueueDirectScan
{
	QueueInsertState *st;
	Relation	rel;
	Relation	index;
	Snapshot	snap;
	CommandId	cid;
	IndexScanDesc scan;
} QueueDirectScan;

extern bool QueueDirectScanBegin(QueueDirectScan *ds, QueueInfo *q, CmdType cmd, bool by_id,
								 int nkeys);
extern void QueueDirectScanEnd(QueueDirectScan *ds);
extern void QueueDirectIndexEntries(QueueInsertState *st, Relation rel, TupleTableSlot **slots,
									int n, bool update);

#endif							/* QUEUE_DIRECT_H */
