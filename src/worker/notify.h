/*-------------------------------------------------------------------------
 *
 * notify.h
 *	  The NOTIFYs a database worker sends for committed producers.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_WORKER_NOTIFY_H
#define QUEUE_WORKER_NOTIFY_H

#include "datatype/timestamp.h"

extern void WorkerNotifyAsked(int requests, TimestampTz now_ts);
extern void WorkerNotifyReloaded(void);
extern bool WorkerNotify(TimestampTz now_ts);
extern long WorkerNotifyTimeout(long timeout, TimestampTz now_ts);

#endif							/* QUEUE_WORKER_NOTIFY_H */
