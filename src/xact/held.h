/*-------------------------------------------------------------------------
 *
 * held.h
 *	  Held claims: jobs claimed by this transaction, kept in memory until
 *	  it commits.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_XACT_HELD_H
#define QUEUE_XACT_HELD_H

#include "nodes/pg_list.h"

#include "base/job.h"
#include "catalog/cache.h"

typedef struct HeldJob
{
	int64		id;
	int32		qno;
	int			nest;			/* level that claimed it */
	int			done_nest;		/* level that completed it, 0 if none */
	int			written_nest;	/* level that wrote it back, 0 if none */
	Oid			userid;			/* the role that claimed it */
	Datum		values[JOB_NCARRIED];
	bool		nulls[JOB_NCARRIED];
} HeldJob;

extern void QueueHeldAddJob(int32 qno, const Datum *values, const bool *nulls);
extern int	QueueHeldCompleteIds(QueueInfo *q, Datum *ids, int n, bool has_token, int32 token,
								 Datum *done_ids, int *ndone, Datum *groups, int *ngroups);
extern void QueueHeldWriteBack(QueueInfo *q, int64 id);
extern void QueueHeldWriteBackAll(void);
extern int	QueueHeldInGroup(int32 qno, text *group_key);
extern int64 QueueHeldWithDedup(int32 qno, text *dedup_key);
extern int64 QueueHeldCount(int32 qno);
extern List *QueueHeldJobs(void);

/* steps of the end of a (sub)transaction, called by xact/xact.c */
extern void HeldAtPreCommit(void);
extern void HeldAtPrepare(void);
extern void HeldAtEnd(void);
extern void HeldAtSubEnd(int nest, bool commit);

#endif							/* QUEUE_XACT_HELD_H */
