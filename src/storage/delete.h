/*-------------------------------------------------------------------------
 *
 * delete.h
 *	  Completing running jobs without the executor.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_STORAGE_DELETE_H
#define QUEUE_STORAGE_DELETE_H

#include "catalog/cache.h"
#include "shmem/leasemap.h"

extern int	QueueDeleteRunning(QueueInfo *q, const Datum *ids, int n, const QueueLeased *leases,
							   bool has_token, int32 token, Datum **values, bool **nulls,
							   bool *leased_done, Datum *retry, int *nretry);

#endif							/* QUEUE_STORAGE_DELETE_H */
