/*-------------------------------------------------------------------------
 *
 * leasemap.h
 *	  Shared memory segment "queue leases": the jobs under batch leases and
 *	  the leases themselves.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SHMEM_LEASEMAP_H
#define QUEUE_SHMEM_LEASEMAP_H

#include "datatype/timestamp.h"
#include "storage/itemptr.h"
#include "storage/lwlock.h"

/* Entries of both tables are keyed by (database, id). */
typedef struct LeaseKey
{
	Oid			dboid;
	uint32		zero;			/* no padding: the whole key is hashed */
	int64		id;				/* a job's id, or a lease's */
} LeaseKey;

/* A job under a batch lease. */
typedef struct LeasedJob
{
	LeaseKey	key;
	int64		lease;
	int32		attempt;		/* the row's attempt when leased (one less than the lease's) */
	ItemPointerData tid;		/* the job's row; invalid if not known */
} LeasedJob;

/* A batch lease. */
typedef struct LeaseBatch
{
	LeaseKey	key;
	TransactionId xid;			/* the claim's until it commits, then invalid */
	int32		remaining;		/* its jobs not finished by committed work */
	TimestampTz claimed_at;
	TimestampTz lease_until;
	int32		owner_pid;		/* the claimer's session */
	TimestampTz owner_start;
} LeaseBatch;

/* A job under a batch lease, with its lease's times: what finishing it needs. */
typedef struct QueueLeased
{
	int64		lease;			/* 0: not under a batch lease */
	int32		attempt;		/* the row's: the claim handed out the next */
	ItemPointerData tid;		/* the job's row, if known */
	TimestampTz claimed_at;
	TimestampTz lease_until;
	int32		owner_pid;
	TimestampTz owner_start;
} QueueLeased;

extern Size LeaseMapShmemSize(void);
extern void LeaseMapRequestLocks(void);
extern void LeaseMapShmemInit(void);
extern bool LeaseMapActive(void);

extern bool LeaseMapReserve(int njobs, int nbatches);
extern void LeaseMapUnreserve(int njobs, int nbatches);

extern LWLock *LeaseMapQueueLock(int32 qno);
extern bool LeaseMapQueueHasLeases(int32 qno);
extern bool LeaseMapIsLeased(int32 qno, int64 id, int32 attempt, bool *any);
extern bool LeaseMapFindJob(int64 id, LeasedJob *copy);
extern bool LeaseMapAddJob(int64 id, int64 lease, int32 attempt, const ItemPointerData *tid);
extern bool LeaseMapRemoveJob(int64 id, int64 lease);

extern bool LeaseMapGetBatch(int64 lease, LeaseBatch *copy);
extern bool LeaseMapPutBatch(const LeaseBatch *batch, bool replace);
extern void LeaseMapBatchCommitted(int64 lease);
extern int	LeaseMapBatchAdd(int64 lease, int n);
extern void LeaseMapRemoveBatch(int64 lease);

extern void LeaseMapForget(Oid dboid, int32 qno);
extern TimestampTz LeaseMapNextExpiry(int32 qno);
extern int	LeaseMapEnded(int32 qno, int64 **leases);

#endif							/* QUEUE_SHMEM_LEASEMAP_H */
