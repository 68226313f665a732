/*-------------------------------------------------------------------------
 *
 * plans.h
 *	  The saved statements each queue has, made on first use.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_CATALOG_PLANS_H
#define QUEUE_CATALOG_PLANS_H

#include "catalog/cache.h"
#include "catalog/planids.h"

extern SPIPlanPtr QueueGetPlan(QueueInfo *q, QueuePlanId which);
extern int	QueuePlanColumn(QueuePlanId which, const char *name);
extern Datum QueuePlanValue(QueuePlanId which, uint64 row, const char *name, bool *isnull);

#endif							/* QUEUE_CATALOG_PLANS_H */
