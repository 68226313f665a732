/*-------------------------------------------------------------------------
 *
 * pending.h
 *	  What a transaction tells the queues' shared state when it ends.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_XACT_PENDING_H
#define QUEUE_XACT_PENDING_H

#include "datatype/timestamp.h"

#include "base/job.h"

/* what this transaction did to queue qno */
extern void QueueXactMadeReady(int32 qno, int32 prio, int64 rank, int64 n);
extern void QueueXactClaimed(int32 qno, int32 prio, int64 rank, bool took);
extern void QueueXactResetAtEnd(int32 qno, bool forget, bool keep_due);
extern void QueueXactUnskipAtEnd(int32 qno);
extern void QueueXactSlotsFreed(int32 qno, int64 n);
extern void QueueXactFinished(int32 qno, int64 completed, int64 failed);
extern void QueueXactNextDue(int32 qno, TimestampTz promoted_at, TimestampTz due, uint64 gen);
extern void QueueXactScheduled(int32 qno, TimestampTz run_at);
extern void QueueXactLeased(int32 qno, TimestampTz until);
extern void QueueXactCount(int32 qno, JobState from, JobState to, int64 n);
extern void QueueXactRecount(int32 qno);
extern bool QueueXactNewQueue(int32 qno);
extern void QueueXactSchedulesChanged(void);

/* what it sees of that before it commits */
extern void QueueXactPendingCounts(int32 qno, int64 *counts);
extern bool QueueXactScanStart(int32 qno, int32 *prio, int64 *rank);
extern bool QueueXactTouched(int32 qno);

/* steps of the end of a (sub)transaction, called by xact/xact.c */
extern void PendingAtPrepare(void);
extern void PendingAtCommit(void);
extern void PendingAtAbort(void);
extern void PendingAtSubCommit(int nest);
extern void PendingAtSubAbort(int nest);

#endif							/* QUEUE_XACT_PENDING_H */
