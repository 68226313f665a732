/*-------------------------------------------------------------------------
 *
 * enqueue.c
 *	  queue.enqueue and queue.enqueue_batch: adding jobs.
 *
 * Ids are drawn in C from the queue's sequence so that a batch gets its
 * ids in array order, and a job's first rank is its sequence value.
 * Nothing is signalled here: the end of the transaction (xact/pending.c)
 * tells the queue's shared state about new ready work when it commits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "base/errors.h"
#include "base/jobid.h"
#include "base/settings.h"
#include "catalog/acl.h"
#include "catalog/plans.h"
#include "catalog/spi.h"
#include "ops/enqueue.h"
#include "ops/groups.h"
#include "storage/insert.h"
#include "xact/held.h"
#include "xact/pending.h"

#define DEDUP_RETRIES		10

/* A job's payload: a JSON object, not too large (index: in a batch, or -1). */
void
QueueCheckPayload(Jsonb *payload, int index)
{
	char		where[64] = "";

	if (index >= 0)
		snprintf(where, sizeof(where), " (element %d)", index + 1);

	if (!JB_ROOT_IS_OBJECT(payload) || JB_ROOT_IS_SCALAR(payload))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("payload%s must be a JSON object", where),
				 errdetail("It is a JSON %s.", JB_ROOT_IS_SCALAR(payload) ? "scalar" : "array"),
				 errhint("Wrap the value in an object, for example '{\"value\": 42}'.")));
	if (VARSIZE(payload) > (Size) queue_max_payload_size)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("payload%s is too large", where),
				 errdetail("It takes %zu bytes; queue.max_payload_size is %d.",
						   (Size) VARSIZE(payload), queue_max_payload_size),
				 errhint("Store large data in a table of your own and enqueue its key.")));
}

/*
 * When a job runs: run_at or now + delay (not both), or now.  Sets
 * *scheduled when that is in the future.
 */
static TimestampTz
resolve_run_at(FunctionCallInfo fcinfo, int run_at_arg, int delay_arg, bool *scheduled)
{
	TimestampTz now_ts = GetCurrentTimestamp();
	TimestampTz run_at = now_ts;

	if (!PG_ARGISNULL(run_at_arg) && !PG_ARGISNULL(delay_arg))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("run_at and delay cannot both be given"),
				 errhint("Pass run_at for a point in time, or delay for a time from now.")));
	if (!PG_ARGISNULL(delay_arg))
	{
		Interval   *delay = PG_GETARG_INTERVAL_P(delay_arg);
		Interval	zero = {0};

		if (DatumGetBool(DirectFunctionCall2(interval_lt, IntervalPGetDatum(delay),
											 IntervalPGetDatum(&zero))))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("delay must not be negative"),
					 errhint("Pass run_at to run a job at a given time.")));
		run_at = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
														 TimestampTzGetDatum(now_ts),
														 IntervalPGetDatum(delay)));
	}
	else if (!PG_ARGISNULL(run_at_arg))
		run_at = PG_GETARG_TIMESTAMPTZ(run_at_arg);

	if (TIMESTAMP_NOT_FINITE(run_at))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("run_at must be a finite time"),
				 errhint("To hold a job back indefinitely, pause its queue.")));
	*scheduled = run_at > now_ts;
	return run_at;
}

/*
 * Whether something on q's table can make an insert skip its row: a BEFORE
 * INSERT row trigger (which returns NULL) or a rule.
 */
static bool
inserts_skipped(QueueInfo *q)
{
	Relation	rel = table_open(QueueTableRelid(q), AccessShareLock);
	bool		may = rel->rd_rules != NULL ||
		(rel->trigdesc != NULL && rel->trigdesc->trig_insert_before_row);

	table_close(rel, AccessShareLock);
	return may;
}

static int32
get_priority(FunctionCallInfo fcinfo, int arg)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("priority must not be null"),
				 errhint("Leave it out for the default priority 0.")));
	return PG_GETARG_INT32(arg);
}

/*
 * The state a new job of q starts in: scheduled for later, or waiting
 * behind an unfinished job of its group (locking the group), or ready.
 */
static JobState
first_state(QueueInfo *q, bool scheduled, text *group_key)
{
	if (group_key != NULL && QueueGroupBusy(q, group_key))
		return JS_WAITING;
	return scheduled ? JS_SCHEDULED : JS_READY;
}

/*
 * n jobs went in, the first in state first, the others in state rest: what
 * the transaction tells shared memory when it commits.
 */
static void
note_enqueued(QueueInfo *q, int n, JobState first, JobState rest, TimestampTz run_at,
			  int32 priority, int64 first_seq)
{
	QueueXactCount(q->qno, JS_NONE, first, 1);
	QueueXactCount(q->qno, JS_NONE, rest, n - 1);
	if (first == JS_SCHEDULED)
		QueueXactScheduled(q->qno, run_at);
	else if (first == JS_READY)
		QueueXactMadeReady(q->qno, priority, first_seq, rest == JS_READY ? n : 1);
}

/*
 * Insert the job of PLAN_INSERT_DEDUP's values unless an unfinished job
 * holds its dedup_key (values[5]); returns that job's id, or 0 if ours
 * went in.  The holder may finish in between, so try again.
 */
static int64
insert_with_dedup(QueueInfo *q, Datum *values, char *nulls)
{
	bool		isnull;

	for (int i = 0;; i++)
	{
		QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_INSERT_DEDUP), values, nulls, false, 0),
					  SPI_OK_INSERT_RETURNING, -1, "insert a job", q->name);
		if (SPI_processed == 1)
			return 0;
		QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_FIND_DEDUP), &values[5], NULL, false, 1),
					  SPI_OK_SELECT, -1, "look up a dedup_key", q->name);
		if (SPI_processed == 1)
			return DatumGetInt64(QueuePlanValue(PLAN_FIND_DEDUP, 0, "id", &isnull));
		if (inserts_skipped(q))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("could not insert a job in queue \"%s\"", q->name),
					 errdetail("The statement inserted no row, and no unfinished job holds the dedup_key."),
					 errhint("A rule or trigger on the queue's tables rewrote the statement or skipped rows; drop it.")));
		if (i >= DEDUP_RETRIES)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not enqueue with dedup_key: it is changing hands too fast"),
					 errhint("Retry the transaction.")));
	}
}

PG_FUNCTION_INFO_V1(queue_enqueue);
Datum
queue_enqueue(PG_FUNCTION_ARGS)
{
	text	   *qname = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	Jsonb	   *payload;
	text	   *group_key = PG_ARGISNULL(5) ? NULL : PG_GETARG_TEXT_PP(5);
	text	   *dedup_key = PG_ARGISNULL(6) ? NULL : PG_GETARG_TEXT_PP(6);
	bool		scheduled;
	TimestampTz run_at;
	int32		priority;
	QueueInfo  *q;
	int64		seq;
	int64		id;
	int64		holder;
	JobState	state;
	Datum		values[7];
	char		nulls[7] = "       ";

	QueueCheckNotNull(PG_ARGISNULL(1), "payload", "Pass a JSON object, '{}' if the job needs no data.");
	payload = PG_GETARG_JSONB_P(1);
	QueueCheckPayload(payload, -1);
	run_at = resolve_run_at(fcinfo, 2, 3, &scheduled);
	priority = get_priority(fcinfo, 4);
	QueueCheckKey("group_key", group_key);
	QueueCheckKey("dedup_key", dedup_key);

	QueueSpiBegin();
	q = QueueLookupByName(qname);
	QueueOpen(q, QUEUE_PRODUCE, 0);
	state = first_state(q, scheduled, group_key);
	seq = QueueNextSeq(q);
	id = JobIdMake(seq, q->qno);

	/*
	 * A job this transaction claimed holds its key too, though it has no
	 * row to conflict with until it is written back at commit.
	 */
	holder = dedup_key != NULL ? QueueHeldWithDedup(q->qno, dedup_key) : 0;
	if (holder != 0)
	{
		QueueSpiEnd();
		PG_RETURN_INT64(holder);
	}

	values[0] = Int64GetDatum(id);
	values[1] = TimestampTzGetDatum(run_at);
	values[2] = CStringGetTextDatum(job_state_names[state]);
	values[3] = Int32GetDatum(priority);
	values[4] = group_key ? PointerGetDatum(group_key) : (Datum) 0;
	nulls[4] = group_key ? ' ' : 'n';
	values[5] = dedup_key ? PointerGetDatum(dedup_key) : (Datum) 0;
	nulls[5] = dedup_key ? ' ' : 'n';
	values[6] = JsonbPGetDatum(payload);

	if (dedup_key != NULL)
		holder = insert_with_dedup(q, values, nulls);
	else if (!QueueInsertJob(q, id, run_at, state, priority, group_key, payload))
		QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_INSERT), values, nulls, false, 0),
					  SPI_OK_INSERT, 1, "insert a job", q->name);
	if (holder == 0)
		note_enqueued(q, 1, state, state, run_at, priority, seq);
	QueueSpiEnd();
	PG_RETURN_INT64(holder != 0 ? holder : id);
}

/* The payloads of enqueue_batch, checked: their number in *n. */
static Datum *
batch_payloads(ArrayType *payloads, int *n)
{
	Datum	   *elems;
	bool	   *elem_nulls;

	if (ARR_NDIM(payloads) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("payloads must be a one-dimensional array"),
				 errhint("Flatten the array; each element is one job.")));
	deconstruct_array(payloads, JSONBOID, -1, false, TYPALIGN_INT, &elems, &elem_nulls, n);
	if (*n > QUEUE_MAX_BATCH)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cannot enqueue %d jobs in one call", *n),
				 errdetail("The limit is %d.", QUEUE_MAX_BATCH),
				 errhint("Split the array into several calls.")));
	for (int i = 0; i < *n; i++)
	{
		if (elem_nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("payload (element %d) must not be null", i + 1),
					 errhint("Pass '{}' for a job that needs no data.")));
		QueueCheckPayload(DatumGetJsonbP(elems[i]), i);
	}
	return elems;
}

PG_FUNCTION_INFO_V1(queue_enqueue_batch);
Datum
queue_enqueue_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *qname = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	text	   *group_key = PG_ARGISNULL(5) ? NULL : PG_GETARG_TEXT_PP(5);
	ArrayType  *payloads;
	Datum	   *elems;
	int			n;
	bool		scheduled;
	TimestampTz run_at;
	int32		priority;
	QueueInfo  *q;
	Datum	   *ids;
	int64		first_seq = 0;
	JobState	first;
	JobState	rest;

	QueueCheckNotNull(PG_ARGISNULL(1), "payloads",
					  "Pass an array of JSON objects, for example ARRAY['{\"n\":1}', '{\"n\":2}']::jsonb[].");
	payloads = PG_GETARG_ARRAYTYPE_P(1);
	elems = batch_payloads(payloads, &n);
	run_at = resolve_run_at(fcinfo, 2, 3, &scheduled);
	priority = get_priority(fcinfo, 4);
	QueueCheckKey("group_key", group_key);

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	/* Outside SPI's memory: the ids are returned after SPI_finish. */
	ids = palloc(Max(n, 1) * sizeof(Datum));

	QueueSpiBegin();
	q = QueueLookupByName(qname);
	QueueOpen(q, QUEUE_PRODUCE, 0);
	if (n == 0)
	{
		QueueSpiEnd();
		return (Datum) 0;
	}

	/* In a group, only the first job can be the head (but see below). */
	first = first_state(q, scheduled, group_key);
	rest = group_key != NULL ? JS_WAITING : first;
	for (int i = 0; i < n; i++)
	{
		int64		seq = QueueNextSeq(q);

		if (i == 0)
			first_seq = seq;
		ids[i] = Int64GetDatum(JobIdMake(seq, q->qno));
	}

	if (!QueueInsertJobs(q, n, ids, run_at, first, rest, priority, group_key, elems))
	{
		/* the table needs the executor (triggers, row security) */
		Datum		values[7];
		char		nulls[7] = "       ";

		values[0] = PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE));
		values[1] = PointerGetDatum(payloads);
		values[2] = TimestampTzGetDatum(run_at);
		values[3] = CStringGetTextDatum(job_state_names[first]);
		values[4] = Int32GetDatum(priority);
		values[5] = group_key ? PointerGetDatum(group_key) : (Datum) 0;
		nulls[5] = group_key ? ' ' : 'n';
		values[6] = CStringGetTextDatum(job_state_names[rest]);
		QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_INSERT_BATCH), values, nulls, false, 0),
					  SPI_OK_INSERT, n, "insert jobs", q->name);
	}
	note_enqueued(q, n, first, rest, run_at, priority, first_seq);

	/* with group_max_running n, more of them than the first may start */
	if (group_key != NULL && first != JS_WAITING && n > 1 && q->group_max_running > 1)
	{
		Datum		key = PointerGetDatum(group_key);

		QueueGroupAdvance(q, &key, 1, true);
	}
	QueueSpiEnd();

	for (int i = 0; i < n; i++)
	{
		bool		isnull = false;

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &ids[i], &isnull);
	}
	return (Datum) 0;
}
