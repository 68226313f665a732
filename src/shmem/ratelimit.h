/*-------------------------------------------------------------------------
 *
 * ratelimit.h
 *	  The token bucket of a queue's rate limit, in shared memory.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SHMEM_RATELIMIT_H
#define QUEUE_SHMEM_RATELIMIT_H

#include "datatype/timestamp.h"

extern int	QueueRateTake(int32 qno, int32 limit, int64 period_us, int want, TimestampTz now,
						  TimestampTz *next_at);
extern bool QueueRateGiveBack(int32 qno, int32 limit, int n);

#endif							/* QUEUE_SHMEM_RATELIMIT_H */
