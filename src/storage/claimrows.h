/*-------------------------------------------------------------------------
 *
 * claimrows.h
 *	  Claiming jobs without the executor.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_STORAGE_CLAIMROWS_H
#define QUEUE_STORAGE_CLAIMROWS_H

#include "storage/itemptr.h"

#include "catalog/cache.h"

/*
 * The jobs a claim locks into one batch lease instead of writing them
 * (xact/leases.c keeps the arrays, of room entries).
 */
typedef struct QueueClaimBatch
{
	int			room;			/* how many jobs may join */
	int			n;				/* how many joined: */
	int64	   *ids;
	ItemPointerData *tids;		/* their rows */
	int32	   *attempts;		/* and the rows' attempts */
} QueueClaimBatch;

/* Called with each job taken: its carried columns. */
typedef void (*QueueClaimEmit) (void *arg, const Datum *values, const bool *nulls);

extern int	QueueClaimRows(QueueInfo *q, QueuePlanId which, bool in_place, const Datum *args,
						   int want, bool check_leases, QueueClaimBatch *batch,
						   QueueClaimEmit emit, void *arg);

#endif							/* QUEUE_STORAGE_CLAIMROWS_H */
