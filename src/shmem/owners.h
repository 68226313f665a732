/*-------------------------------------------------------------------------
 *
 * owners.h
 *	  Shared memory segment "queue claim owners": which sessions that
 *	  claimed jobs are alive.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SHMEM_OWNERS_H
#define QUEUE_SHMEM_OWNERS_H

#include "datatype/timestamp.h"

extern Size QueueOwnersShmemSize(void);
extern void QueueOwnersShmemInit(void);
extern void QueueOwnerPublish(void);
extern void QueueOwnerCommitted(void);
extern bool QueueOwnerAlive(int32 pid, TimestampTz start);

#endif							/* QUEUE_SHMEM_OWNERS_H */
