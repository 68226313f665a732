/*-------------------------------------------------------------------------
 *
 * insert.h
 *	  New rows of a queue's tables: jobs at enqueue, finished jobs into
 *	  the archive.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_STORAGE_INSERT_H
#define QUEUE_STORAGE_INSERT_H

#include "utils/jsonb.h"

#include "base/job.h"
#include "catalog/cache.h"

extern bool QueueInsertJob(QueueInfo *q, int64 id, TimestampTz run_at, JobState state,
						   int32 priority, text *group_key, Jsonb *payload);
extern bool QueueInsertJobs(QueueInfo *q, int n, const Datum *ids, TimestampTz run_at,
							JobState first_state, JobState state, int32 priority,
							text *group_key, const Datum *payloads);
extern void QueueArchiveJobs(QueueInfo *q, int n, Datum *const *values, bool *const *nulls);

#endif							/* QUEUE_STORAGE_INSERT_H */
