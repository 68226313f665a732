/*-------------------------------------------------------------------------
 *
 * finish.c
 *	  What a consumer does with a claimed job: queue.complete, queue.fail,
 *	  queue.extend and queue.release.
 *
 * Each takes an optional attempt number, the fencing token claim handed
 * out.  With a token, a job that is no longer this consumer's (its lease
 * ran out and it was returned or claimed again) is left alone and the call
 * reports that with false or NULL; without one, acting on a job that is
 * not running is an error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "base/errors.h"
#include "base/job.h"
#include "base/jobid.h"
#include "catalog/acl.h"
#include "catalog/plans.h"
#include "catalog/spi.h"
#include "ops/groups.h"
#include "storage/delete.h"
#include "storage/insert.h"
#include "xact/held.h"
#include "xact/leaseload.h"
#include "xact/leases.h"
#include "xact/pending.h"

static int64
get_job_id(FunctionCallInfo fcinfo)
{
	QueueCheckNotNull(PG_ARGISNULL(0), "job id", "Pass the id returned by queue.claim().");
	return PG_GETARG_INT64(0);
}

static void
check_positive(const char *what, Interval *iv, bool zero_ok)
{
	Interval	zero = {0};
	bool		bad;

	bad = DatumGetBool(DirectFunctionCall2(zero_ok ? interval_lt : interval_le,
										   IntervalPGetDatum(iv), IntervalPGetDatum(&zero)));
	if (bad)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be %s", what, zero_ok ? "zero or positive" : "positive"),
				 errhint("Pass an interval such as '30 seconds'.")));
}

/* Error for acting on a job that is not running, naming what it is. */
static void
report_not_running(QueueInfo *q, int64 id, const char *verb)
{
	Datum		arg = Int64GetDatum(id);
	char	   *state = NULL;

	if (q != NULL &&
		SPI_execute_plan(QueueGetPlan(q, PLAN_STATE), &arg, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
		state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
							 QueuePlanColumn(PLAN_STATE, "state"));

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("job " INT64_FORMAT " is not running", id),
			 state ? errdetail("It is %s.", state)
			 : errdetail("It does not exist or has already finished."),
			 errhint("Only a job taken by queue.claim() can be %s; pass the attempt it returned to have a stale call return instead of failing.", verb)));
}

/*
 * Lock a running job; returns the attempts that count toward max_attempts,
 * or -1 if it is not ours.
 */
static int32
lock_running(QueueInfo *q, int64 id, Datum token, bool has_token)
{
	Datum		args[2];
	char		nulls[2] = "  ";
	bool		isnull;

	args[0] = Int64GetDatum(id);
	args[1] = token;
	nulls[1] = has_token ? ' ' : 'n';
	QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_LOCK_RUNNING), args, nulls, false, 1),
				  SPI_OK_SELECT, -1, "lock a running job", q->name);
	if (SPI_processed == 0)
		return -1;
	return DatumGetInt32(QueuePlanValue(PLAN_LOCK_RUNNING, 0, "attempt", &isnull)) -
		DatumGetInt32(QueuePlanValue(PLAN_LOCK_RUNNING, 0, "uncounted", &isnull));
}

/* Approximate length of an interval in microseconds, for backoff. */
static double
interval_usecs(const Interval *iv)
{
	return (double) iv->time + (double) iv->day * USECS_PER_DAY +
		(double) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;
}

/*
 * Completed jobs (n rows of carried columns) stopped running: free their
 * max_running slots, and let the next job of their groups go.
 */
static void
after_running(QueueInfo *q, Datum *const *values, bool *const *nulls, int n)
{
	Datum	   *ids = palloc(sizeof(Datum) * n);
	Datum	   *groups = palloc(sizeof(Datum) * n);
	int			ngroups = 0;

	for (int i = 0; i < n; i++)
	{
		ids[i] = values[i][JC_ID];
		if (!nulls[i][JC_GROUP_KEY])
			groups[ngroups++] = PointerGetDatum(PG_DETOAST_DATUM_COPY(values[i][JC_GROUP_KEY]));
	}
	QueueSlotsFree(q, ids, n);
	if (ngroups > 0)
		QueueGroupAdvance(q, groups, ngroups, false);
}

static int
cmp_datum_int64(const void *a, const void *b)
{
	int64		x = DatumGetInt64(*(const Datum *) a);
	int64		y = DatumGetInt64(*(const Datum *) b);

	return (x > y) - (x < y);
}

static int
cmp_int64(const void *a, const void *b)
{
	int64		x = *(const int64 *) a;
	int64		y = *(const int64 *) b;

	return (x > y) - (x < y);
}

/*
 * The leases whose last jobs this call finished go: their rows are locked
 * after their jobs', as everywhere (xact/leases.c), so the worker, which
 * locks a lease's row first, never waits for a job.  Each lease once.
 */
static void
end_emptied_leases(QueueInfo *q, const QueueLeased *leases, const bool *leased_done, int n)
{
	int64	   *ended = palloc(sizeof(int64) * n);
	int			m = 0;

	for (int i = 0; i < n; i++)
		if (leased_done[i])
			ended[m++] = leases[i].lease;
	qsort(ended, m, sizeof(int64), cmp_int64);
	for (int i = 0; i < m; i++)
		if ((i == 0 || ended[i] != ended[i - 1]) && QueueLeaseWouldEnd(ended[i], 0))
			QueueLeaseEnd(q, ended[i]);
	pfree(ended);
}

/*
 * Delete the running jobs of q among ids[0..n-1] without the executor
 * (storage/delete.c), with what their batch leases say of them; as
 * QueueDeleteRunning, but ids may come in any order and more than once.
 */
static int
delete_running(QueueInfo *q, const Datum *ids, int n, bool has_token, int32 token,
			   Datum **values, bool **isnull, Datum *retry, int *nretry)
{
	Datum	   *sorted = palloc(sizeof(Datum) * n);
	QueueLeased *leases = palloc0(sizeof(QueueLeased) * n);
	bool	   *leased_done = palloc(sizeof(bool) * n);
	bool		track = QueueLeaseTracking(q);
	int			m = 0;
	int			done;

	/* in id order, each once, as an index scan of id = ANY ($1) would */
	memcpy(sorted, ids, sizeof(Datum) * n);
	qsort(sorted, n, sizeof(Datum), cmp_datum_int64);
	for (int i = 0; i < n; i++)
		if (i == 0 || sorted[i] != sorted[i - 1])
			sorted[m++] = sorted[i];
	for (int i = 0; track && i < m; i++)
		if (!QueueLeaseFind(q, DatumGetInt64(sorted[i]), &leases[i]))
			leases[i].lease = 0;

	done = QueueDeleteRunning(q, sorted, m, leases, has_token, token, values, isnull,
							  leased_done, retry, nretry);
	if (done <= 0)
		return done;
	for (int i = 0; i < m; i++)
		if (leased_done[i])
			QueueLeaseDone(q->qno, leases[i].lease, DatumGetInt64(sorted[i]));
	end_emptied_leases(q, leases, leased_done, m);
	return done;
}

/*
 * Complete the given ids (all of queue q); returns how many finished.
 * Jobs this transaction claimed itself are finished from memory (xact/held.c).
 */
static uint64
complete_ids(QueueInfo *q, Datum *ids, int n, Datum token, bool has_token)
{
	int			done;
	int			rest;
	int			nheld;
	int			ngroups;
	int			nretry;
	Datum	  **values;
	bool	  **isnull;
	Datum	   *retry;
	Datum	   *held_ids = palloc(sizeof(Datum) * n);
	Datum	   *groups = palloc(sizeof(Datum) * n);

	rest = QueueHeldCompleteIds(q, ids, n, has_token, DatumGetInt32(token),
								held_ids, &nheld, groups, &ngroups);
	if (nheld > 0)
	{
		QueueXactFinished(q->qno, nheld, 0);
		QueueSlotsFree(q, held_ids, nheld);
		if (ngroups > 0)
			QueueGroupAdvance(q, groups, ngroups, false);
	}
	if (rest == 0)
		return nheld;
	n = rest;

	/* directly, except what storage/delete.c leaves to the executor */
	values = palloc(sizeof(Datum *) * n);
	isnull = palloc(sizeof(bool *) * n);
	retry = palloc(sizeof(Datum) * n);
	done = delete_running(q, ids, n, has_token, DatumGetInt32(token), values, isnull,
						  retry, &nretry);
	if (done < 0)
	{
		/* the statement completes running rows: jobs of batch leases first become ones */
		for (int i = 0; i < n; i++)
			QueueLeaseMaterialize(q, DatumGetInt64(ids[i]), has_token, DatumGetInt32(token));
		done = 0;
		memcpy(retry, ids, sizeof(Datum) * n);
		nretry = n;
	}

	if (nretry > 0)
	{
		Datum		args[3];
		char		nulls[3] = "   ";
		int			ret;
		SPITupleTable *tt;

		args[0] = PointerGetDatum(construct_array(retry, nretry, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE));
		args[1] = token;
		nulls[1] = has_token ? ' ' : 'n';
		args[2] = TimestampTzGetDatum(GetCurrentTimestamp());
		ret = SPI_execute_plan(QueueGetPlan(q, q->keep_archive ? PLAN_COMPLETE_ARCHIVE : PLAN_COMPLETE_DELETE),
							   args, nulls, false, 0);
		QueueCheckSpi(ret, SPI_OK_DELETE_RETURNING, -1, "complete jobs", q->name);
		tt = SPI_tuptable;
		for (uint64 i = 0; i < SPI_processed; i++, done++)
		{
			values[done] = palloc0(sizeof(Datum) * JOB_NCARRIED);
			isnull[done] = palloc(sizeof(bool) * JOB_NCARRIED);
			if (q->keep_archive)
			{
				Assert(tt->tupdesc->natts == JOB_NCARRIED);
				heap_deform_tuple(tt->vals[i], tt->tupdesc, values[done], isnull[done]);
				continue;
			}
			/* (id, group_key): all the rest needs */
			memset(isnull[done], true, sizeof(bool) * JOB_NCARRIED);
			values[done][JC_ID] = QueuePlanValue(PLAN_COMPLETE_DELETE, i, "id", &isnull[done][JC_ID]);
			values[done][JC_GROUP_KEY] = QueuePlanValue(PLAN_COMPLETE_DELETE, i, "group_key",
														&isnull[done][JC_GROUP_KEY]);
		}
	}
	if (done == 0)
		return nheld;
	if (q->keep_archive)
		QueueArchiveJobs(q, done, values, isnull);
	QueueXactFinished(q->qno, done, 0);
	QueueXactCount(q->qno, JS_RUNNING, JS_NONE, done);
	after_running(q, values, isnull, done);
	return done + nheld;
}

/*
 * The queue of job id, which the caller may consume from, or NULL if
 * there is none (and missing_ok).  Must be called inside QueueSpiBegin; the
 * rest of the scope runs as the queue's owner.
 */
static QueueInfo *
open_job_queue(int64 id, bool missing_ok)
{
	QueueInfo  *q = QueueLookupById(id, missing_ok);

	if (q != NULL)
		QueueOpen(q, QUEUE_CONSUME, id);
	return q;
}

PG_FUNCTION_INFO_V1(queue_complete);
Datum
queue_complete(PG_FUNCTION_ARGS)
{
	int64		id = get_job_id(fcinfo);
	bool		has_token = !PG_ARGISNULL(1);
	Datum		idd = Int64GetDatum(id);
	QueueInfo  *q;
	bool		done;

	QueueSpiBegin();
	q = open_job_queue(id, has_token);
	done = q != NULL && complete_ids(q, &idd, 1, PG_GETARG_DATUM(1), has_token) == 1;
	if (!done && !has_token)
		report_not_running(q, id, "completed");
	QueueSpiEnd();
	PG_RETURN_BOOL(done);
}

static int
cmp_qno(const void *a, const void *b)
{
	int32		x = JobIdQueue(DatumGetInt64(*(const Datum *) a));
	int32		y = JobIdQueue(DatumGetInt64(*(const Datum *) b));

	return (x > y) - (x < y);
}

/* By queue, then by id: a queue's jobs are finished in enqueue order. */
static int
cmp_qno_id(const void *a, const void *b)
{
	int64		x = DatumGetInt64(*(const Datum *) a);
	int64		y = DatumGetInt64(*(const Datum *) b);
	int			c = cmp_qno(a, b);

	return c != 0 ? c : (x > y) - (x < y);
}

/*
 * queue.complete(ids bigint[]): completes those of the ids that are
 * running and returns how many; the others are left as they are.
 */
PG_FUNCTION_INFO_V1(queue_complete_many);
Datum
queue_complete_many(PG_FUNCTION_ARGS)
{
	ArrayType  *arr;
	Datum	   *ids;
	bool	   *nulls;
	int			n;
	int64		total = 0;

	QueueCheckNotNull(PG_ARGISNULL(0), "ids", "Pass an array of job ids returned by queue.claim().");
	arr = PG_GETARG_ARRAYTYPE_P(0);
	if (ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr)) > QUEUE_MAX_COMPLETE)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cannot complete %d jobs in one call", ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr))),
				 errdetail("The limit is %d.", QUEUE_MAX_COMPLETE),
				 errhint("Split the array into several calls.")));
	deconstruct_array(arr, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE, &ids, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("ids must not contain null (element %d)", i + 1),
					 errhint("Remove the nulls from the array.")));

	/* One statement per queue the ids belong to. */
	qsort(ids, n, sizeof(Datum), cmp_qno_id);
	QueueSpiBegin();
	for (int start = 0; start < n;)
	{
		int			end = start + 1;
		QueueInfo  *q;

		while (end < n && cmp_qno(&ids[start], &ids[end]) == 0)
			end++;
		q = QueueLookupById(DatumGetInt64(ids[start]), true);
		if (q != NULL)
			QueueOpen(q, QUEUE_CONSUME, DatumGetInt64(ids[start]));
		if (q != NULL)
			total += complete_ids(q, &ids[start], end - start, (Datum) 0, false);
		start = end;
	}
	QueueSpiEnd();
	PG_RETURN_INT64(total);
}

/* fail's error text, kept up to QUEUE_MAX_ERROR_LEN: stack traces, not megabytes. */
static char *
error_text(FunctionCallInfo fcinfo)
{
	char	   *msg;
	int			len;

	QueueCheckNotNull(PG_ARGISNULL(1), "error",
					  "Pass a description of what went wrong; it is kept in last_error and the job's history.");
	msg = text_to_cstring(PG_GETARG_TEXT_PP(1));
	len = strlen(msg);
	if (len > QUEUE_MAX_ERROR_LEN)
	{
		len = pg_mbcliplen(msg, len, QUEUE_MAX_ERROR_LEN);
		msg[len] = '\0';
		msg = psprintf("%s... (truncated)", msg);
	}
	return msg;
}

/*
 * When a job of q that failed its attempt (counted attempts so far) runs
 * again: after retry_in, or after the backoff, base * 2^(attempt-1),
 * capped, shortened by up to half.
 */
static TimestampTz
retry_at(QueueInfo *q, int32 attempt, Interval *retry_in, TimestampTz now_ts)
{
	double		delay;

	if (retry_in != NULL)
		return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													   TimestampTzGetDatum(now_ts),
													   IntervalPGetDatum(retry_in)));
	delay = interval_usecs(&q->backoff_base) * pow(2.0, attempt - 1);
	delay = Min(delay, interval_usecs(&q->backoff_max));
	delay *= 1.0 - 0.5 * pg_prng_double(&pg_global_prng_state);
	return now_ts + (int64) delay;
}

/*
 * Record the failed attempt of locked job id: it becomes state at run_at.
 * Returns the state it is left in: a retried job keeps its group waiting,
 * unless the queue requeues it behind the rest of its group; a dead one
 * lets the group go on.
 */
static JobState
record_failure(QueueInfo *q, int64 id, JobState state, TimestampTz run_at, const char *msg,
			   TimestampTz now_ts)
{
	Datum		args[5];
	bool		nogroup;
	int32		prio;
	int64		rank;
	Datum		group;
	bool		isnull;

	args[0] = Int64GetDatum(id);
	args[1] = CStringGetTextDatum(job_state_names[state]);
	args[2] = TimestampTzGetDatum(run_at);
	args[3] = CStringGetTextDatum(msg);
	args[4] = TimestampTzGetDatum(now_ts);
	QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_FAIL), args, NULL, false, 1),
				  SPI_OK_UPDATE_RETURNING, 1, "record a failed attempt", q->name);
	prio = DatumGetInt32(QueuePlanValue(PLAN_FAIL, 0, "priority", &isnull));
	rank = DatumGetInt64(QueuePlanValue(PLAN_FAIL, 0, "rank", &isnull));
	group = QueuePlanValue(PLAN_FAIL, 0, "group_key", &nogroup);
	if (!nogroup)
		group = PointerGetDatum(PG_DETOAST_DATUM_COPY(group));
	QueueSlotsFree(q, &args[0], 1);
	if (!nogroup && state != JS_DEAD && q->group_requeue)
	{
		QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_GROUP_REQUEUE), &args[0], NULL, false, 1),
					  SPI_OK_UPDATE, 1, "requeue a job behind its group", q->name);
		state = JS_WAITING;
	}
	if (!nogroup && (state == JS_DEAD || state == JS_WAITING))
		QueueGroupAdvance(q, &group, 1, false);
	if (state == JS_SCHEDULED)
		QueueXactScheduled(q->qno, run_at);
	else if (state == JS_READY)
		QueueXactMadeReady(q->qno, prio, rank, 1);
	QueueXactFinished(q->qno, 0, 1);
	QueueXactCount(q->qno, JS_RUNNING, state, 1);
	return state;
}

PG_FUNCTION_INFO_V1(queue_fail);
Datum
queue_fail(PG_FUNCTION_ARGS)
{
	int64		id = get_job_id(fcinfo);
	char	   *msg = error_text(fcinfo);
	Interval   *retry_in = PG_ARGISNULL(2) ? NULL : PG_GETARG_INTERVAL_P(2);
	bool		has_token = !PG_ARGISNULL(3);
	QueueInfo  *q;
	int32		attempt;
	TimestampTz now_ts = GetCurrentTimestamp();
	TimestampTz run_at = now_ts;
	JobState	state;

	if (retry_in != NULL)
		check_positive("retry_in", retry_in, true);

	QueueSpiBegin();
	q = open_job_queue(id, has_token);
	if (q != NULL)
	{
		QueueHeldWriteBack(q, id);
		QueueLeaseMaterialize(q, id, has_token, DatumGetInt32(PG_GETARG_DATUM(3)));
	}
	attempt = q != NULL ? lock_running(q, id, PG_GETARG_DATUM(3), has_token) : -1;
	if (attempt < 0)
	{
		if (!has_token)
			report_not_running(q, id, "failed");
		QueueSpiEnd();
		PG_RETURN_NULL();
	}

	if (attempt >= q->max_attempts)
		state = JS_DEAD;
	else
	{
		run_at = retry_at(q, attempt, retry_in, now_ts);
		state = run_at > now_ts ? JS_SCHEDULED : JS_READY;
	}
	state = record_failure(q, id, state, run_at, msg, now_ts);
	QueueSpiEnd();
	PG_RETURN_TEXT_P(cstring_to_text(state == JS_DEAD ? "dead" : "retry"));
}

PG_FUNCTION_INFO_V1(queue_extend);
Datum
queue_extend(PG_FUNCTION_ARGS)
{
	int64		id = get_job_id(fcinfo);
	bool		has_token = !PG_ARGISNULL(2);
	QueueInfo  *q;
	TimestampTz until = 0;
	bool		isnull;

	QueueCheckNotNull(PG_ARGISNULL(1), "lease",
					  "Pass how long from now the job stays yours, for example '30 seconds'.");
	check_positive("lease", PG_GETARG_INTERVAL_P(1), false);

	QueueSpiBegin();
	q = open_job_queue(id, has_token);
	if (q != NULL)
	{
		Datum		args[3];
		char		nulls[3] = "   ";

		QueueHeldWriteBack(q, id);
		QueueLeaseMaterialize(q, id, has_token, DatumGetInt32(PG_GETARG_DATUM(2)));
		args[0] = Int64GetDatum(id);
		args[1] = PG_GETARG_DATUM(2);
		nulls[1] = has_token ? ' ' : 'n';
		args[2] = DirectFunctionCall2(timestamptz_pl_interval,
									  TimestampTzGetDatum(GetCurrentTimestamp()),
									  PG_GETARG_DATUM(1));
		QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_EXTEND), args, nulls, false, 1),
						SPI_OK_UPDATE_RETURNING, -1, "extend a lease", q->name);
		if (SPI_processed == 1)
			until = DatumGetTimestampTz(QueuePlanValue(PLAN_EXTEND, 0, "lease_until", &isnull));
	}
	if (until == 0)
	{
		if (!has_token)
			report_not_running(q, id, "extended");
		QueueSpiEnd();
		PG_RETURN_NULL();
	}
	QueueSpiEnd();
	PG_RETURN_TIMESTAMPTZ(until);
}

PG_FUNCTION_INFO_V1(queue_release);
Datum
queue_release(PG_FUNCTION_ARGS)
{
	int64		id = get_job_id(fcinfo);
	bool		has_token = !PG_ARGISNULL(2);
	TimestampTz now_ts = GetCurrentTimestamp();
	TimestampTz run_at = PG_ARGISNULL(1) ? now_ts : PG_GETARG_TIMESTAMPTZ(1);
	QueueInfo  *q;
	Datum		args[4];
	bool		scheduled = run_at > now_ts;
	bool		isnull;

	if (TIMESTAMP_NOT_FINITE(run_at))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("run_at must be a finite time"),
				 errhint("Leave it out to make the job ready at once.")));

	QueueSpiBegin();
	q = open_job_queue(id, has_token);
	if (q != NULL)
	{
		QueueHeldWriteBack(q, id);
		QueueLeaseMaterialize(q, id, has_token, DatumGetInt32(PG_GETARG_DATUM(2)));
	}
	if (q == NULL || lock_running(q, id, PG_GETARG_DATUM(2), has_token) < 0)
	{
		if (!has_token)
			report_not_running(q, id, "released");
		QueueSpiEnd();
		PG_RETURN_BOOL(false);
	}

	args[0] = Int64GetDatum(id);
	args[1] = CStringGetTextDatum(scheduled ? "scheduled" : "ready");
	args[2] = TimestampTzGetDatum(run_at);
	args[3] = TimestampTzGetDatum(now_ts);
	QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_RELEASE), args, NULL, false, 1),
					SPI_OK_UPDATE_RETURNING, 1, "release a job", q->name);
	QueueXactCount(q->qno, JS_RUNNING, scheduled ? JS_SCHEDULED : JS_READY, 1);
	if (scheduled)
		QueueXactScheduled(q->qno, run_at);
	else
		QueueXactMadeReady(q->qno,
						   DatumGetInt32(QueuePlanValue(PLAN_RELEASE, 0, "priority", &isnull)),
						   DatumGetInt64(QueuePlanValue(PLAN_RELEASE, 0, "rank", &isnull)), 1);
	QueueSlotsFree(q, &args[0], 1);
	QueueSpiEnd();
	PG_RETURN_BOOL(true);
}
