/*-------------------------------------------------------------------------
 *
 * direct.h
 *	  What the direct paths (storage/insert.c, claimrows.c, delete.c)
 *	  share: the per-queue state for writing a queue's rows without the
 *	  executor, and an index scan that changes the rows it finds.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_STORAGE_DIRECT_H
#define QUEUE_STORAGE_DIRECT_H

#include "access/genam.h"
#include "executor/executor.h"

#include "base/job.h"
#include "catalog/cache.h"

#define MAX_COLS	((int) JC_NCOLS > (int) AC_NCOLS ? (int) JC_NCOLS : (int) AC_NCOLS)

typedef struct QueueDirectState
{
	Oid			relid;
	Oid			parentid;		/* archive: the queue's archive, relid its segment */
	int32		qno;			/* the queue's number */
	bool		archive;		/* the archive table, not the hot one */
	bool		valid;
	MemoryContext cxt;
	EState	   *estate;			/* long-lived, for the compiled predicates */
	TupleTableSlot *slot;
	TupleTableSlot **slots;		/* for table_multi_insert */
	int			nslots;
	AttrNumber	attnums[MAX_COLS];	/* by JobCol, or by ArchiveCol */
	int			nindexes;
	Oid		   *indexoids;
	IndexInfo **indexinfos;
	ExprState **predicates;
	bool	   *claim_unchanged;	/* a claim leaves the index's keys as they are */
	Datum		states[JS_NSTATES]; /* enum values of queue.job_state */

	/* hot table only, for claimrows.c and delete.c; InvalidOid if not possible */
	Oid			ready_index;	/* q_<name>$ready, scanned in claim order */
	Oid			pkey_index;		/* the unique btree on id (delete.c) */
	TupleTableSlot *scan_slot;	/* the table's own slot type, for the scan */
	TupleTableSlot *lock_slot;	/* ... and for rows a batch claim locks */
} QueueDirectState;

/*
 * A scan of one of the hot table's indexes that changes the rows it finds,
 * as one SQL statement would.
 */
typedef struct QueueDirectScan
{
	QueueDirectState *st;
	Relation	rel;
	Relation	index;
	Snapshot	snap;
	CommandId	cid;
	IndexScanDesc scan;
} QueueDirectScan;

extern void QueueDirectInit(void);
extern void QueueDirectRelease(QueueInfo *q);
extern Relation QueueDirectOpen(QueueInfo *q, bool archive, AclMode mode);
extern bool QueueDirectScanBegin(QueueDirectScan *ds, QueueInfo *q, CmdType cmd, bool by_id,
								 int nkeys);
extern void QueueDirectScanEnd(QueueDirectScan *ds);
extern void QueueDirectIndexEntries(QueueDirectState *st, Relation rel, TupleTableSlot **slots,
									int n, bool update);

#endif							/* QUEUE_STORAGE_DIRECT_H */
