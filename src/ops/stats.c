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
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("function %s must return a row type", format_procedure(fcinfo->flinfo->fn_oid)),
				 errhint("It was declared by hand; reinstall the extension.")));
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

/*
 * Run the one-row SELECT sql as role owner and copy its JS_NSTATES + 1
 * columns into values and nulls (in memory cxt), in a subtransaction that
 * is then rolled back: it gives back the locks the SELECT took, so that
 * queue.stats over any number of queues holds the locks of one at a time.
 * The server's lock table is shared by every session, and holding every
 * queue's locks in one statement made other sessions fail with "out of
 * shared memory" once there were a few thousand queues.  An error is
 * thrown again once the subtransaction is gone.
 */
static void
read_unlocked(QueueInfo *q, Oid owner, const char *sql, Datum *values, bool *nulls, MemoryContext cxt)
{
	ResourceOwner oldowner = CurrentResourceOwner;
	MemoryContext caller = CurrentMemoryContext;
	QueueAsRole as;

	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		QueueAsRoleInScopeBegin(&as, owner);
		QueueCheckSpi(SPI_execute(sql, true, 1), SPI_OK_SELECT, 1, "count jobs", q->name);
		for (int i = 0; i <= JS_NSTATES; i++)
		{
			Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, i);
			Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &nulls[i]);
			MemoryContext old = MemoryContextSwitchTo(cxt);

			values[i] = nulls[i] ? (Datum) 0 : datumCopy(d, att->attbyval, att->attlen);
			MemoryContextSwitchTo(old);
		}
		QueueAsRoleEnd(&as);
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(caller);
		CurrentResourceOwner = oldowner;
		ReThrowError(edata);
	}
	PG_END_TRY();
}

/*
 * queue._table_stats(qno, with_counts, gen): the age of the queue's oldest
 * ready job and, with with_counts, its jobs counted by state, read from
 * its table as the table's owner; given gen (of queue._counts), the
 * counts are kept in shared memory.  For a role that may read the queue:
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
	Oid			relid = InvalidOid;

	for (int i = 0; i <= JS_NSTATES; i++)
		nulls[i] = true;
	QueueCheckReader(PG_GETARG_INT32(0));
	QueueSpiBegin();
	q = QueueLookupByQno(PG_GETARG_INT32(0), true);
	if (q != NULL)
		relid = QueueTableRelid(q);
	if (OidIsValid(relid))
	{
		const char *t = quote_qualified_identifier("queue", psprintf("q_%s", q->name));
		const char *l = quote_qualified_identifier("queue", psprintf("l_%s", q->name));
		StringInfoData sql;

		initStringInfo(&sql);
		appendStringInfoString(&sql, "SELECT ");
		/*
		 * In JobState's order, which is the order of the result's
		 * columns.  Jobs under batch leases are ready rows at the attempt
		 * a lease lists, and running (xact/leases.c).
		 */
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
		 * The oldest ready job is at the head of one of the priorities:
		 * visit each priority's head once (a loose index scan).
		 */
		appendStringInfo(&sql,
						 "(WITH RECURSIVE p(priority) AS ("
						 " (SELECT priority FROM %1$s WHERE state = 'ready' AND NOT queue._leased(id)"
						 " ORDER BY priority DESC, rank LIMIT 1)"
						 " UNION ALL"
						 " SELECT (SELECT j.priority FROM %1$s j WHERE j.state = 'ready' AND j.priority < p.priority"
						 " AND NOT queue._leased(j.id) ORDER BY j.priority DESC, j.rank LIMIT 1)"
						 " FROM p WHERE p.priority IS NOT NULL)"
						 " SELECT CASE WHEN min(h.since) IS NOT NULL"
						 " THEN greatest(now() - min(h.since), interval '0') END"
						 " FROM p, LATERAL (SELECT greatest(j.run_at, j.enqueued_at) AS since FROM %1$s j"
						 " WHERE j.state = 'ready' AND j.priority = p.priority AND NOT queue._leased(j.id)"
						 " ORDER BY j.rank LIMIT 1) h"
						 " WHERE p.priority IS NOT NULL)", t);

		read_unlocked(q, QueueRelOwner(relid, q->name), sql.data, values, nulls, outer);
		if (with_counts && PG_NARGS() > 2 && !PG_ARGISNULL(2))
			store_counts(q->qno, (uint64) PG_GETARG_INT64(2), values, nulls);
	}
	old = MemoryContextSwitchTo(outer);
	result = heap_form_tuple(tupdesc, values, nulls);
	MemoryContextSwitchTo(old);
	QueueSpiEnd();
	PG_RETURN_DATUM(HeapTupleGetDatum(result));
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
