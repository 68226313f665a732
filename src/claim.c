/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  queue.claim: taking due jobs nobody else holds.
 *
 * A claim locks up to max_jobs ready jobs with FOR UPDATE SKIP LOCKED in
 * claim order (priority descending, then rank) and marks them running under
 * a lease.  Its index scan starts at the queue's shared cursor (shmem.c)
 * rather than at the front of the ready index, so its cost does not grow
 * with the dead index entries that claimed jobs leave behind while an old
 * snapshot keeps vacuum from removing them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "queue.h"

/* The claim order of the first and last job one claim took. */
typedef struct ClaimSpan
{
	int			count;
	int32		first_prio;
	int64		first_rank;
	int32		last_prio;
	int64		last_rank;
} ClaimSpan;

/* Make scheduled jobs that came due ready, in this transaction. */
static void
promote_due(QueueInfo *q, TimestampTz now)
{
	Datum		arg = TimestampTzGetDatum(now);
	bool		isnull;
	HeapTuple	tup;

	if (SPI_execute_plan(QueueGetPlan(q, PLAN_PROMOTE), &arg, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not promote scheduled jobs of queue \"%s\"", q->name);
	tup = SPI_tuptable->vals[0];
	if (DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull)) > 0)
		QueueXactMadeReady(q->qno,
						   DatumGetInt32(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull)),
						   DatumGetInt64(SPI_getbinval(tup, SPI_tuptable->tupdesc, 3, &isnull)));
}

/* Run one claim statement and copy what it took into the result. */
static void
run_claim(QueueInfo *q, QueuePlanId which, Datum *args, int want,
		  ReturnSetInfo *rsinfo, ClaimSpan *span)
{
	args[1] = Int32GetDatum(want);
	if (SPI_execute_plan(QueueGetPlan(q, which), args, NULL, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not claim jobs of queue \"%s\"", q->name);

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		Datum		values[6];
		bool		nulls[6];
		bool		isnull;
		int32		prio;
		int64		rank;

		for (int c = 0; c < 6; c++)
			values[c] = SPI_getbinval(tup, desc, c + 1, &nulls[c]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);

		prio = DatumGetInt32(SPI_getbinval(tup, desc, 7, &isnull));
		rank = DatumGetInt64(SPI_getbinval(tup, desc, 8, &isnull));
		if (span->count++ == 0)
		{
			span->first_prio = prio;
			span->first_rank = rank;
		}
		span->last_prio = prio;
		span->last_rank = rank;
	}
}

PG_FUNCTION_INFO_V1(queue_claim);
Datum
queue_claim(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *qname = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	int32		max_jobs;
	Interval   *lease = PG_ARGISNULL(2) ? NULL : PG_GETARG_INTERVAL_P(2);
	QueueInfo  *q;
	TimestampTz now;
	Datum		args[7];
	ClaimSpan	span = {0};
	bool		have_cursor;
	int32		cursor_prio;
	int64		cursor_rank;
	uint64		gen = 0;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("max_jobs must not be null"),
				 errhint("Leave it out to claim one job.")));
	max_jobs = PG_GETARG_INT32(1);
	if (max_jobs < 1 || max_jobs > QUEUE_MAX_CLAIM)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_jobs must be between 1 and %d, not %d", QUEUE_MAX_CLAIM, max_jobs),
				 errhint("Claim in batches of up to %d jobs.", QUEUE_MAX_CLAIM)));
	if (lease != NULL)
	{
		Interval	zero = {0};

		if (DatumGetBool(DirectFunctionCall2(interval_le, IntervalPGetDatum(lease),
											 IntervalPGetDatum(&zero))))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lease must be positive"),
					 errhint("Leave it out to use the queue's lease.")));
	}

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	QueueSpiBegin();
	q = QueueLookupByName(qname);
	if (q->paused)
	{
		QueueSpiEnd();
		return (Datum) 0;
	}

	now = GetCurrentTimestamp();
	if (QueuePromoteDue(q->qno, now))
		promote_due(q, now);

	args[0] = IntervalPGetDatum(lease != NULL ? lease : &q->lease);
	args[2] = Int32GetDatum(MyProcPid);
	args[3] = TimestampTzGetDatum(MyStartTimestamp);
	args[4] = TimestampTzGetDatum(now);

	/* gen must be read before the claim statements take their snapshots. */
	have_cursor = QueueCursorGet(q->qno, &cursor_prio, &cursor_rank, &gen);
	if (have_cursor)
	{
		args[5] = Int32GetDatum(cursor_prio);
		args[6] = Int64GetDatum(cursor_rank);
		run_claim(q, PLAN_CLAIM_AT, args, max_jobs, rsinfo, &span);
		if (span.count < max_jobs)
			run_claim(q, PLAN_CLAIM_BELOW, args, max_jobs - span.count, rsinfo, &span);
	}
	else
		run_claim(q, PLAN_CLAIM_FRONT, args, max_jobs, rsinfo, &span);

	if (span.count > 0)
	{
		/* If we roll back, what we took is ready again from here on. */
		QueueXactClaimed(q->qno, span.first_prio, span.first_rank);

		/*
		 * Everything before our last job is gone, or held by other claims
		 * whose rollback will lower the cursor again.  A transaction
		 * snapshot may predate gen, so only fresh snapshots may raise it.
		 */
		if (!IsolationUsesXactSnapshot())
			QueueCursorAdvance(q->qno, span.last_prio, span.last_rank + 1, gen);
	}

	QueueSpiEnd();
	return (Datum) 0;
}
