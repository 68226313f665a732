/*-------------------------------------------------------------------------
 *
 * wakeups.h
 *	  Who is woken when work becomes claimable or falls due.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SHMEM_WAKEUPS_H
#define QUEUE_SHMEM_WAKEUPS_H

#include "datatype/timestamp.h"

extern void QueueSignalReady(int32 qno, int64 n);
extern void QueueSignalDue(int32 qno);
extern void QueueSignalClaimShort(int32 qno);
extern void QueueSignalRateRefill(int32 qno, TimestampTz at);
extern void QueueSignalTokensBack(int32 qno, int n);
extern void QueueSignalScheduled(TimestampTz at);
extern void QueueSignalClaimerExit(void);
extern void QueueSignalSchedules(void);

#endif							/* QUEUE_SHMEM_WAKEUPS_H */
