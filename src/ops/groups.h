/*-------------------------------------------------------------------------
 *
 * groups.h
 *	  Ordered groups (group_key) and max_running, for the other operations.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_OPS_GROUPS_H
#define QUEUE_OPS_GROUPS_H

#include "catalog/cache.h"

extern bool QueueGroupBusy(QueueInfo *q, text *group_key);
extern void QueueGroupAdvance(QueueInfo *q, Datum *group_keys, int n, bool fill);
extern int	QueueSlotsTake(QueueInfo *q, int want, Datum **slots);
extern void QueueSlotsAssign(QueueInfo *q, Datum *slots, Datum *ids, int n);
extern void QueueSlotsFree(QueueInfo *q, Datum *ids, int n);

#endif							/* QUEUE_OPS_GROUPS_H */
