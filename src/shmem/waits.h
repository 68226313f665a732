/*-------------------------------------------------------------------------
 *
 * waits.h
 *	  Shared memory segment "queue waits": where claim(wait =>) sleeps.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SHMEM_WAITS_H
#define QUEUE_SHMEM_WAITS_H

#include "datatype/timestamp.h"

extern Size QueueWaitShmemSize(void);
extern void QueueWaitShmemInit(void);
extern bool QueueWaitActive(void);

extern void QueueWaitWake(int32 qno, int64 n);
extern bool QueueWaitersPresent(int32 qno, TimestampTz since);

/* a waiting claim, in this order */
extern void QueueWaitBegin(int32 qno);
extern uint64 QueueWaitPrepare(int32 qno, bool blind);
extern bool QueueWaitTimed(int32 qno, TimestampTz at, TimestampTz now);
extern void QueueWaitUntimed(TimestampTz due, TimestampTz now);
extern bool QueueWaitSleep(int32 qno, uint64 gen, long timeout_ms);
extern void QueueWaitDone(void);
extern void QueueWaitAtEnd(int nest);

#endif							/* QUEUE_SHMEM_WAITS_H */
