/*-------------------------------------------------------------------------
 *
 * enqueue.h
 *	  What other API functions share with queue.enqueue.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_OPS_ENQUEUE_H
#define QUEUE_OPS_ENQUEUE_H

#include "utils/jsonb.h"

extern void QueueCheckPayload(Jsonb *payload, int index);

#endif							/* QUEUE_OPS_ENQUEUE_H */
