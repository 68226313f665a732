/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  The SQL functions behind queue.stats and queue.jobs: counts kept in
 *	  shared memory, counts read from a queue's table, and the jobs this
 *	  transaction holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/timestamp.h"
#include "utils/resowner.h"
#include "utils/regproc.h"

#include "base/errors.h"
#include "base/job.h"
#include "base/jobid.h"
#include "base/role.h"
#include "catalog/acl.h"
#include "catalog/spi.h"
#include "shmem/queuestate.h"
#include "xact/held.h"
#include "xact/pending.h"

/* queue._count(qno, from, to, n): n jobs changed state in SQL code */
PG_FUNCTION_INFO_V1(queue_count);
Datum
queue_count(PG_FUNCTION_ARGS)
{
	QueueCheckWriter(PG_GETARG_INT32(0));
	QueueXactCount(PG_GETARG_INT32(0),
				   JobStateFromName(text_to_cstring(PG_GETARG_TEXT_PP(1))),
				   JobStateFromName(text_to_cstring(PG_GETARG_TEXT_PP(2))),
				   PG_GETARG_INT64(3));
	PG_RETURN_VOID();
}

/*
 * queue._new_queue(qno): this transaction created queue qno.  False if it
 * gets no shared state (queue.max_queues), or there is none; NULL
 * without it (not preloaded).
 */
PG_FUNCTION_INFO_V1(queue_new_queue);
Datum
queue_new_queue(PG_FUNCTION_ARGS)
{
	QueueCheckWriter(PG_GETARG_INT32(0));
	if (!QueueStateActive())
		PG_RETURN_NULL();
	PG_RETURN_BOOL(QueueXactNewQueue(PG_GETARG_INT32(0)));
}

/*
 * queue._shared_state(qno): whether the queue has its state in shared
 * memory (NULL when the library is not preloaded and no queue has).
 */
PG_FUNCTION_INFO_V1(queue_shared_state);
Datum
queue_shared_state(PG_FUNCTION_ARGS)
{
	QueueCheckReader(PG_GETARG_INT32(0));
	if (!QueueStateActive())
		PG_RETURN_NULL();
	PG_RETURN_BOOL(QueueStateHas(PG_GETARG_INT32(0)));
}

/* queue._recount(qno): this transaction changed jobs wholesale */
PG_FUNCTION_INFO_V1(queue_recount);
Datum
queue_recount(PG_FUNCTION_ARGS)
{
	QueueCheckWriter(PG_GETARG_INT32(0));
	QueueXactRecount(PG_GETARG_INT32(0));
	PG_RETURN_VOID();
}

/*
 * The row type a function of ours returns.  Only a hand-made declaration
 * of one of our C functions could return something else.
 */
static TupleDesc
result_row_type(FunctionCallInfo fcinfo)
{
	TupleDesc	tupdesc = (TupleDesc) fcinfo->flinfo->fn_extra;
	MemoryContext old;

	/* kept for the statement's later calls: queue.stats makes one per queue */
	if (tupdesc != NULL)
		return tupdesc;
	old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("function %s must return a row type", format_procedure(fcinfo->flinfo->fn_oid)),
				 errhint("It was declared by hand; reinstall the extension.")));
	MemoryContextSwitchTo(old);
	fcinfo->flinfo->fn_extra = tupdesc;
	return tupdesc;
}

/*
 * queue._counts(qno): the job counts by state if shared memory has them
 * (valid), and the generation to pass to queue._set_counts after counting.
 */
PG_FUNCTION_INFO_V1(queue_counts);
Datum
queue_counts(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc = result_row_type(fcinfo);
	Datum		values[2 + JS_NSTATES];
	bool		nulls[2 + JS_NSTATES] = {0};
	int64		counts[JS_NSTATES] = {0};
	uint64		gen;
	bool		valid;

	QueueCheckReader(PG_GETARG_INT32(0));
	valid = QueueCountsGet(PG_GETARG_INT32(0), counts, &gen);
	/* what this transaction changed shows to it, as its rows would */
	if (valid)
		QueueXactPendingCounts(PG_GETARG_INT32(0), counts);
	values[0] = BoolGetDatum(valid);
	values[1] = Int64GetDatum((int64) gen);
	for (int i = 0; i < JS_NSTATES; i++)
		values[2 + i] = Int64GetDatum(counts[i]);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * Store the counts just read (values) in shared memory, unless changes
 * were applied since generation gen was read or the count's snapshot may
 * predate it.
 */
static void
store_counts(int32 qno, uint64 gen, const Datum *values, const bool *nulls)
{
	int64		counts[JS_NSTATES];

	if (IsolationUsesXactSnapshot())
		return;
	for (int i = 0; i < JS_NSTATES; i++)
	{
		if (nulls[i])
			return;
		counts[i] = DatumGetInt64(values[i]);
	}
	QueueCountsSet(qno, gen, counts);
}

/*
 * queue._set_counts(qno, gen, ready, scheduled, running, dead, waiting):
 * store a recount (store_counts).  For the queue.stats of 0.1 to 0.3;
 * since 0.4 queue._table_stats stores its counts itself.
 */
PG_FUNCTION_INFO_V1(queue_set_counts);
Datum
queue_set_counts(PG_FUNCTION_ARGS)
{
	Datum		values[JS_NSTATES];
	bool		nulls[JS_NSTATES] = {0};

	QueueCheckWriter(PG_GETARG_INT32(0));
	for (int i = 0; i < JS_NSTATES; i++)
		values[i] = PG_GETARG_DATUM(2 + i);
	store_counts(PG_GETARG_INT32(0), (uint64) PG_GETARG_INT64(1), values, nulls);
	PG_RETURN_VOID();
}

/* What read_row reads, and where it puts the row. */
typedef struct RowRead
{
	QueueInfo  *q;
	Oid			owner;
	const char *sql;
	Datum	   *values;
	bool	   *nulls;
	MemoryContext cxt;
} RowRead;

static void
read_row(void *arg)
{
	RowRead    *r = (RowRead *) arg;
	QueueAsRole as;

	QueueAsRoleInScopeBegin(&as, r->owner);
	QueueCheckSpi(SPI_execute(r->sql, true, 1), SPI_OK_SELECT, 1, "count jobs", r->q->name);
	for (int i = 0; i <= JS_NSTATES; i++)
	{
		Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, i);
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &r->nulls[i]);
		MemoryContext old = MemoryContextSwitchTo(r->cxt);

		r->values[i] = r->nulls[i] ? (Datum) 0 : datumCopy(d, att->attbyval, att->attlen);
		MemoryContextSwitchTo(old);
	}
	QueueAsRoleEnd(&as);
}

/*
 * The SELECT of queue q's table: its jobs counted by state (in JobState's
 * order, NULLs without with_counts), then when its oldest ready job became
 * ready, or (with age) how long ago.  Jobs under batch leases are ready
 * rows at the attempt a lease lists, and running (xact/leases.c).
 */
static char *
table_stats_sql(QueueInfo *q, bool with_counts, bool age)
{
	const char *t = quote_qualified_identifier("queue", psprintf("q_%s", q->name));
	const char *l = quote_qualified_identifier("queue", psprintf("l_%s", q->name));
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < JS_NSTATES; i++)
	{
		if (!with_counts)
		{
			appendStringInfoString(&sql, "NULL::bigint, ");
			continue;
		}
		appendStringInfo(&sql, "(SELECT count(*) FROM %s WHERE state = '%s')", t, job_state_names[i]);
		if (i == JS_READY || i == JS_RUNNING)
			appendStringInfo(&sql,
							 " %s (SELECT count(*) FROM %s b CROSS JOIN LATERAL unnest(b.ids, b.attempts) AS u(id, attempt)"
							 " JOIN %s j ON j.id = u.id AND j.attempt = u.attempt AND j.state = 'ready')",
							 i == JS_READY ? "-" : "+", l, t);
		appendStringInfoString(&sql, ", ");
	}

	/*
	 * The oldest ready job is at the head of one of the priorities: visit
	 * each priority's head once (a loose index scan).
	 */
	appendStringInfo(&sql,
					 "(WITH RECURSIVE p(priority) AS ("
					 " (SELECT priority FROM %1$s WHERE state = 'ready' AND NOT queue._leased(id)"
					 " ORDER BY priority DESC, rank LIMIT 1)"
					 " UNION ALL"
					 " SELECT (SELECT j.priority FROM %1$s j WHERE j.state = 'ready' AND j.priority < p.priority"
					 " AND NOT queue._leased(j.id) ORDER BY j.priority DESC, j.rank LIMIT 1)"
					 " FROM p WHERE p.priority IS NOT NULL)"
					 " SELECT %2$s"
					 " FROM p, LATERAL (SELECT greatest(j.run_at, j.enqueued_at) AS since FROM %1$s j"
					 " WHERE j.state = 'ready' AND j.priority = p.priority AND NOT queue._leased(j.id)"
					 " ORDER BY j.rank LIMIT 1) h"
					 " WHERE p.priority IS NOT NULL)", t,
					 age ? "CASE WHEN min(h.since) IS NOT NULL THEN greatest(now() - min(h.since), interval '0') END"
					 : "min(h.since)");
	return sql.data;
}

/*
 * Read the row of table_stats_sql from queue q's table relid as its
 * owner, into values and nulls (JS_NSTATES + 1 of them, in memory cxt),
 * giving back the locks at once (QueueReadInSubxact): queue.stats over
 * any number of queues holds the locks of one at a time.  False, with
 * nothing read, for a queue whose table is gone.
 */
static bool
read_table_stats(QueueInfo *q, bool with_counts, bool age, Datum *values, bool *nulls,
				 MemoryContext cxt)
{
	Oid			relid = q == NULL ? InvalidOid : QueueTableRelid(q);
	RowRead		r;

	for (int i = 0; i <= JS_NSTATES; i++)
		nulls[i] = true;
	if (!OidIsValid(relid))
		return false;
	r.q = q;
	r.owner = QueueRelOwner(relid, q->name);
	r.sql = table_stats_sql(q, with_counts, age);
	r.values = values;
	r.nulls = nulls;
	r.cxt = cxt;
	QueueReadInSubxact(read_row, &r);
	return true;
}

/*
 * queue._table_stats(qno, with_counts, gen): the age of the queue's oldest
 * ready job and, with with_counts, its jobs counted by state, read from
 * its table as the table's owner; given gen (of queue._counts), the
 * counts are kept in shared memory.  For the queue.stats of 0.4 and 0.5
 * (since 0.6, queue._queue_stats).  For a role that may read the queue:
 * it reads the table as its owner, and a table's owner can make reading
 * the table run code of theirs (on PostgreSQL 15 a rule can turn an empty
 * table into a view), which must not run with the reader's rights.  Like
 * VACUUM and ANALYZE running index expressions, the read runs as the
 * owner, as a restricted operation with a safe search_path.  NULLs for a
 * queue whose table is gone.  (Before 0.4 there was no gen, and
 * queue._set_counts stored the counts.)
 */
PG_FUNCTION_INFO_V1(queue_table_stats);
Datum
queue_table_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc = result_row_type(fcinfo);
	MemoryContext outer = CurrentMemoryContext;
	bool		with_counts = PG_GETARG_BOOL(1);
	Datum		values[JS_NSTATES + 1] = {0};
	bool		nulls[JS_NSTATES + 1];
	HeapTuple	result;
	MemoryContext old;
	QueueInfo  *q;

	QueueCheckReader(PG_GETARG_INT32(0));
	QueueSpiBegin();
	q = QueueLookupByQno(PG_GETARG_INT32(0), true);
	if (read_table_stats(q, with_counts, true, values, nulls, outer) &&
		with_counts && PG_NARGS() > 2 && !PG_ARGISNULL(2))
		store_counts(q->qno, (uint64) PG_GETARG_INT64(2), values, nulls);
	old = MemoryContextSwitchTo(outer);
	result = heap_form_tuple(tupdesc, values, nulls);
	MemoryContextSwitchTo(old);
	QueueSpiEnd();
	PG_RETURN_DATUM(HeapTupleGetDatum(result));
}

/* The columns of queue._queue_stats, in order. */
enum
{
	QS_READY,
	QS_SCHEDULED,
	QS_RUNNING,
	QS_DEAD,
	QS_OLDEST_READY_AGE,
	QS_COMPLETED,
	QS_FAILED,
	QS_WAITING,
	QS_SHARED_STATE,
	QS_NCOLS
};

/*
 * What queue q's table says (read_table_stats) that shared memory did not
 * know: its counts, unless counts_valid, and when its oldest ready job
 * became ready (*since, 0 for none).  Both are kept in shared memory for
 * the next reader, given the generation read before the table's
 * snapshot, unless this transaction changed the queue (its snapshot
 * shows what others do not) or its snapshot may predate the generation.
 */
static void
stats_from_table(QueueInfo *q, bool counts_valid, int64 *counts, uint64 counts_gen,
				 uint64 oldest_gen, TimestampTz *since)
{
	Datum		values[JS_NSTATES + 1];
	bool		nulls[JS_NSTATES + 1];
	bool		keep = !QueueXactTouched(q->qno) && !IsolationUsesXactSnapshot();

	*since = 0;
	if (!read_table_stats(q, !counts_valid, false, values, nulls, CurrentMemoryContext))
		return;
	if (!nulls[JS_NSTATES])
		*since = DatumGetTimestampTz(values[JS_NSTATES]);
	if (keep)
		QueueOldestSet(q->qno, oldest_gen, *since);
	if (counts_valid)
		return;
	for (int i = 0; i < JS_NSTATES; i++)
		counts[i] = nulls[i] ? 0 : DatumGetInt64(values[i]);
	if (keep)
		store_counts(q->qno, counts_gen, values, nulls);
}

/* How long ago, as of now(), since was; zero for a time after now(). */
static Interval *
age_since(TimestampTz since)
{
	TimestampTz now_ts = GetCurrentTransactionStartTimestamp();
	Interval   *age = (Interval *) palloc0(sizeof(Interval));

	if (since < now_ts)
		age->time = now_ts - since;
	return age;
}

/*
 * queue._queue_stats(qno): the row of queue.stats for queue qno.  Counts,
 * recent completions and the oldest ready job come from shared memory
 * (shmem/queuecounts.c); the queue's table is read only for what shared
 * memory does not know (after a restart, or a change to the queue's jobs
 * since it was last read), so that an idle queue costs no read at all:
 * queue.stats over thousands of queues reads only the busy ones.  Jobs
 * this transaction holds count as running (xact/held.c).
 */
PG_FUNCTION_INFO_V1(queue_queue_stats);
Datum
queue_queue_stats(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);
	TupleDesc	tupdesc = result_row_type(fcinfo);
	Datum		values[QS_NCOLS] = {0};
	bool		nulls[QS_NCOLS] = {0};
	int64		counts[JS_NSTATES] = {0};
	uint64		counts_gen;
	uint64		oldest_gen;
	TimestampTz since;
	bool		counts_valid;
	int64		completed;
	int64		failed;
	QueueInfo  *q;

	QueueSpiBegin();
	q = QueueLookupByQno(qno, false);
	QueueCheckReaderOf(q);
	counts_valid = QueueCountsGet(qno, counts, &counts_gen);
	if (!QueueOldestGet(qno, &since, &oldest_gen) || !counts_valid || QueueXactTouched(qno))
		stats_from_table(q, counts_valid, counts, counts_gen, oldest_gen, &since);
	if (counts_valid)
		QueueXactPendingCounts(qno, counts);
	counts[JS_RUNNING] += QueueHeldCount(qno);

	values[QS_READY] = Int64GetDatum(counts[JS_READY]);
	values[QS_SCHEDULED] = Int64GetDatum(counts[JS_SCHEDULED]);
	values[QS_RUNNING] = Int64GetDatum(counts[JS_RUNNING]);
	values[QS_DEAD] = Int64GetDatum(counts[JS_DEAD]);
	values[QS_WAITING] = Int64GetDatum(counts[JS_WAITING]);
	nulls[QS_OLDEST_READY_AGE] = since == 0;
	if (since != 0)
		values[QS_OLDEST_READY_AGE] = IntervalPGetDatum(age_since(since));
	nulls[QS_COMPLETED] = nulls[QS_FAILED] = !QueueRecentCounts(qno, &completed, &failed);
	values[QS_COMPLETED] = Int64GetDatum(completed);
	values[QS_FAILED] = Int64GetDatum(failed);
	nulls[QS_SHARED_STATE] = !QueueStateActive();
	values[QS_SHARED_STATE] = BoolGetDatum(QueueStateHas(qno));
	QueueSpiEnd();
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* queue._recent_counts(qno): completions and failures in the last minute */
PG_FUNCTION_INFO_V1(queue_recent_counts);
Datum
queue_recent_counts(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc = result_row_type(fcinfo);
	Datum		values[2];
	bool		nulls[2] = {false, false};
	int64		completed;
	int64		failed;

	QueueCheckReader(PG_GETARG_INT32(0));
	if (QueueRecentCounts(PG_GETARG_INT32(0), &completed, &failed))
	{
		values[0] = Int64GetDatum(completed);
		values[1] = Int64GetDatum(failed);
	}
	else
		nulls[0] = nulls[1] = true;

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * queue._held(): the jobs this transaction holds (xact/held.c), so that
 * queue.jobs and queue.stats show them as running to the transaction that
 * claimed them.  Only those of queues the user may read or consume from
 * (before 0.4: whose table it may read): a SECURITY DEFINER function may
 * have claimed the others for the transaction, and its caller must not
 * see what it may not read.
 */
PG_FUNCTION_INFO_V1(queue_held);
Datum
queue_held(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	static const JobCol cols[] = {JC_ID, JC_PAYLOAD, JC_ATTEMPT, JC_GROUP_KEY, JC_ENQUEUED_AT,
	JC_LEASE_UNTIL, JC_PRIORITY, JC_RUN_AT, JC_DEDUP_KEY, JC_LAST_ERROR, JC_CLAIMED_AT};
	ListCell   *lc;
	int32		readable_qno = 0;	/* the last queue found readable */

	InitMaterializedSRF(fcinfo, 0);
	if (QueueHeldJobs() == NIL)
		return (Datum) 0;		/* (queue.stats asks once per queue) */
	QueueSpiBegin();
	foreach(lc, QueueHeldJobs())
	{
		HeldJob    *j = (HeldJob *) lfirst(lc);
		int32		qno = JobIdQueue(DatumGetInt64(j->values[JC_ID]));
		Datum		values[lengthof(cols)];
		bool		nulls[lengthof(cols)];

		if (j->done_nest != 0 || j->written_nest != 0)
			continue;
		if (qno != readable_qno)
		{
			QueueInfo  *q = QueueLookupByQno(qno, true);

			if (q == NULL || !OidIsValid(QueueTableRelid(q)) ||
				!(q->legacy_acl ? QueueTablePrivilege(q, ACL_SELECT) :
				  QueueMay(q, GetUserId(), QUEUE_READ | QUEUE_CONSUME)))
				continue;
			readable_qno = qno;
		}
		for (int c = 0; c < (int) lengthof(cols); c++)
		{
			values[c] = j->values[cols[c]];
			nulls[c] = j->nulls[cols[c]];
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	QueueSpiEnd();
	return (Datum) 0;
}
