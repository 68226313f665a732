/*-------------------------------------------------------------------------
 *
 * queuestate.h
 *	  Shared memory segment "queue state": the claim cursor, due times,
 *	  notification marks and counters of each queue.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SHMEM_QUEUESTATE_H
#define QUEUE_SHMEM_QUEUESTATE_H

#include "datatype/timestamp.h"
#include "nodes/pg_list.h"

extern Size QueueStateShmemSize(void);
extern void QueueStateRequestLocks(void);
extern void QueueStateShmemInit(void);
extern bool QueueStateActive(void);
extern bool QueueStateHas(int32 qno);
extern void QueueStateForget(int32 qno);
extern void QueueStateForgetDatabase(Oid dboid);

/* the claim cursor */
extern bool QueueCursorGet(int32 qno, TimestampTz now, int32 *prio, int64 *rank, uint64 *gen);
extern void QueueCursorReserve(int32 qno, int32 prio, int64 rank, int n, uint64 gen);
extern void QueueCursorAdvance(int32 qno, int32 prio, int64 rank, uint64 gen);
extern void QueueCursorLower(int32 qno, int32 prio, int64 rank);
extern void QueueCursorReset(int32 qno);
extern void QueueCursorSkipped(int32 qno, int32 prio, int64 rank, TimestampTz now);
extern void QueueCursorUnskip(int32 qno);

/* due times */
extern bool QueuePromoteDue(int32 qno, TimestampTz now);
extern bool QueueDueGet(int32 qno, TimestampTz *due, uint64 *gen);
extern bool QueueDueSet(int32 qno, TimestampTz due, uint64 gen, bool raise_only);
extern bool QueueDueLower(int32 qno, TimestampTz at);

/* notification marks */
extern int	QueueMarkNotify(int32 qno, TimestampTz after);
extern bool QueueMarkMayWait(int32 qno);
extern List *QueueCollectNotifications(Oid dboid, TimestampTz now_ts, int64 idle_us, List **kept,
										TimestampTz *retry_at);

/* counts, by state (JobState order), and of recent completions */
extern void QueueCountsApply(int32 qno, const int64 *delta);
extern void QueueCountsInvalidate(int32 qno);
extern bool QueueCountsGet(int32 qno, int64 *counts, uint64 *gen);
extern void QueueCountsSet(int32 qno, uint64 gen, const int64 *counts);
extern void QueueCountFinished(int32 qno, int64 completed, int64 failed);
extern bool QueueRecentCounts(int32 qno, int64 *completed, int64 *failed);
extern bool QueueOldestGet(int32 qno, TimestampTz *since, uint64 *gen);
extern void QueueOldestSet(int32 qno, uint64 gen, TimestampTz since);

/* when the archive ring may have work next (worker/upkeep.c) */
extern bool QueueArchiveNextGet(int32 qno, TimestampTz *next, uint64 *gen);
extern void QueueArchiveNextSet(int32 qno, uint64 gen, TimestampTz next);
extern void QueueArchiveForget(int32 qno);

/* whether the queue's batch leases are known (xact/leases.c) */
extern int	QueueLeasesLoaded(int32 qno);
extern void QueueLeasesSetLoaded(int32 qno);

#endif							/* QUEUE_SHMEM_QUEUESTATE_H */
