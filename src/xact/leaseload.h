/*-------------------------------------------------------------------------
 *
 * leaseload.h
 *	  Whether shared memory knows a queue's batch leases, and the queue's
 *	  heavyweight lease lock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_XACT_LEASELOAD_H
#define QUEUE_XACT_LEASELOAD_H

#include "storage/lockdefs.h"

#include "catalog/cache.h"

extern bool QueueLeasesLock(int32 qno, LOCKMODE mode, bool wait);
extern bool QueueLeaseTracking(QueueInfo *q);

#endif							/* QUEUE_XACT_LEASELOAD_H */
