/*-------------------------------------------------------------------------
 *
 * leases.h
 *	  Batch leases: one lease for all the jobs a claim of many takes in a
 *	  transaction of its own, and what this transaction does to them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_XACT_LEASES_H
#define QUEUE_XACT_LEASES_H

#include "catalog/cache.h"
#include "shmem/leasemap.h"
#include "storage/claimrows.h"

struct LeaseAction;

/* A claim that may take a batch lease. */
typedef struct QueueLeaseClaim
{
	bool		track;			/* the queue may have batch leases: check rows */
	bool		on;				/* this claim takes a batch lease */
	QueueInfo  *q;
	TimestampTz claimed_at;
	TimestampTz lease_until;
	struct LeaseAction *action; /* what its transaction must undo or finish */
	QueueClaimBatch batch;		/* the jobs it locked */
	int			published;		/* jobs of the batch whose entries were added */
} QueueLeaseClaim;

/* a claim, in this order */
extern void QueueLeaseClaimBegin(QueueLeaseClaim *lc, QueueInfo *q, int want,
								 TimestampTz claimed_at, TimestampTz lease_until);
extern void QueueLeaseClaimPublish(QueueLeaseClaim *lc);
extern int	QueueLeaseClaimEnd(QueueLeaseClaim *lc);

/* jobs leaving their leases */
extern bool QueueLeaseFind(QueueInfo *q, int64 id, QueueLeased *info);
extern void QueueLeaseDone(int32 qno, int64 lease, int64 id);
extern bool QueueLeaseWouldEnd(int64 lease, int n);
extern void QueueLeaseEnd(QueueInfo *q, int64 lease);
extern void QueueLeaseMaterialize(QueueInfo *q, int64 id, bool has_token, int32 token);
extern void QueueLeasesDropped(int32 qno, int64 lease, const int64 *ids, int n, bool lease_gone);
extern bool QueueLeaseIsLeased(QueueInfo *q, int64 id);
extern void QueueLeaseDroppingExtension(void);

/* steps of the end of a (sub)transaction, called by xact/xact.c */
extern void LeasesAtPrepare(void);
extern void LeasesAtEnd(bool commit);
extern void LeasesAtSubEnd(int nest, bool commit);

#endif							/* QUEUE_XACT_LEASES_H */
