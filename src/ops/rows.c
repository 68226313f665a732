/*-------------------------------------------------------------------------
 *
 * rows.c
 *	  The SQL functions behind the views queue.jobs and queue.archive: the
 *	  rows of one queue's tables, read with the locks given back at once.
 *
 * The views join queue_config with these functions, one call per queue
 * the user may read, so that a query on them locks one queue's tables at
 * a time.  Views over the parents queue._job and queue._archive made the
 * planner open every queue's table and indexes in one statement: with a
 * few thousand queues that filled the server's lock table, which every
 * session shares, and other sessions failed with "out of shared memory".
 * A condition on the view's queue column is applied before the call, so
 * a query about one queue reads only that queue's tables.
 *
 * The tables are read as their owner (as queue.stats counts them), in a
 * subtransaction that is rolled back (base/role.c), through a cursor into
 * the function's tuplestore, which spills to disk past work_mem.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "base/jobid.h"
#include "base/role.h"
#include "catalog/acl.h"
#include "catalog/cache.h"
#include "catalog/spi.h"

/* rows fetched from the cursor at a time */
#define ROWS_PER_FETCH	1000

/* What read_rows reads, and where it puts the rows. */
typedef struct RowsRead
{
	const char *sql;			/* with the queue's number as $1 */
	int32		qno;
	Oid			owner;
	ReturnSetInfo *rsinfo;
} RowsRead;

/*
 * Only a hand-made declaration of our functions, or a table changed by
 * its owner, could make the rows something other than the result type.
 */
static void
check_row_type(TupleDesc got, TupleDesc want)
{
	bool		same = got->natts == want->natts;

	for (int i = 0; same && i < got->natts; i++)
		same = TupleDescAttr(got, i)->atttypid == TupleDescAttr(want, i)->atttypid;
	if (!same)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("the rows of a queue's table do not match the view's columns"),
				 errhint("A column of the queue's table was changed by hand, or the function "
						 "was declared by hand; reinstall the extension.")));
}

static void
read_rows(void *arg)
{
	RowsRead   *r = (RowsRead *) arg;
	Oid			argtypes[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(r->qno)};
	QueueAsRole as;
	Portal		portal;

	QueueAsRoleInScopeBegin(&as, r->owner);
	portal = SPI_cursor_open_with_args(NULL, r->sql, 1, argtypes, args, NULL, true,
									   CURSOR_OPT_NO_SCROLL);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, ROWS_PER_FETCH);
		if (SPI_processed == 0)
			break;
		check_row_type(SPI_tuptable->tupdesc, r->rsinfo->setDesc);
		for (uint64 i = 0; i < SPI_processed; i++)
			tuplestore_puttuple(r->rsinfo->setResult, SPI_tuptable->vals[i]);
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	QueueAsRoleEnd(&as);
}

/* The oid of queue q's table with prefix p (q_, a_, l_), or InvalidOid. */
static Oid
queue_relid(QueueInfo *q, const char *prefix)
{
	return get_relname_relid(psprintf("%s%s", prefix, q->name), get_namespace_oid("queue", false));
}

/*
 * The queue qno if the user may read it (the views ask only for those;
 * called directly, a queue one may not read has no rows, as in the view),
 * and its table with prefix exists; NULL otherwise.
 */
static QueueInfo *
readable_queue(int32 qno, const char *prefix, Oid *relid)
{
	QueueInfo  *q = QueueLookupByQno(qno, true);

	if (q == NULL || !QueueMay(q, GetUserId(), QUEUE_READ))
		return NULL;
	*relid = queue_relid(q, prefix);
	return OidIsValid(*relid) ? q : NULL;
}

/* Fill the SRF's tuplestore with the rows of sql on queue q's table relid. */
static void
read_queue_rows(FunctionCallInfo fcinfo, QueueInfo *q, Oid relid, const char *sql)
{
	RowsRead	r = {sql, q->qno, QueueRelOwner(relid, q->name), (ReturnSetInfo *) fcinfo->resultinfo};

	QueueReadInSubxact(read_rows, &r);
}

/*
 * queue._queue_jobs(qno): the queue's unfinished and dead jobs, for
 * queue.jobs.  Jobs under a batch lease are ready rows at the attempt a
 * lease lists (xact/leases.c), and show as running.  A row counts only in
 * its queue's own tables (ONLY, and its number in the id): their owner
 * could drop the CHECK on ids, or add tables inheriting from them.
 */
PG_FUNCTION_INFO_V1(queue_queue_jobs);
Datum
queue_queue_jobs(PG_FUNCTION_ARGS)
{
	QueueInfo  *q;
	Oid			relid;
	Oid			lease_relid;
	const char *jobs;
	const char *leases = "(SELECT NULL::bigint AS id, NULL::int AS attempt, NULL::timestamptz AS claimed_at,"
		" NULL::timestamptz AS lease_until WHERE false)";

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	QueueSpiBegin();
	q = readable_queue(PG_GETARG_INT32(0), "q_", &relid);
	if (q == NULL)
	{
		QueueSpiEnd();
		return (Datum) 0;
	}
	jobs = quote_qualified_identifier("queue", psprintf("q_%s", q->name));
	lease_relid = queue_relid(q, "l_");
	if (OidIsValid(lease_relid))
		leases = psprintf("(SELECT u.id, u.attempt, b.claimed_at, b.lease_until FROM ONLY %s b,"
						  " unnest(b.ids, b.attempts) AS u(id, attempt))",
						  quote_qualified_identifier("queue", psprintf("l_%s", q->name)));
	read_queue_rows(fcinfo, q, relid,
					psprintf("SELECT j.id, CASE WHEN l.id IS NULL THEN j.state::text ELSE 'running' END,"
							 " j.payload, j.priority, j.run_at, j.attempt + (l.id IS NOT NULL)::int,"
							 " j.group_key, j.dedup_key, j.enqueued_at,"
							 " CASE WHEN l.id IS NULL THEN j.claimed_at ELSE l.claimed_at END,"
							 " CASE WHEN l.id IS NULL THEN j.lease_until ELSE l.lease_until END,"
							 " j.last_error FROM ONLY %s j LEFT JOIN %s l"
							 " ON l.id = j.id AND l.attempt = j.attempt AND j.state = 'ready'"
							 " WHERE j.id %% " JOB_ID_FACTOR_SQL " = $1",
							 jobs, leases));
	QueueSpiEnd();
	return (Datum) 0;
}

/* queue._queue_archive(qno): the queue's archived jobs, for queue.archive */
PG_FUNCTION_INFO_V1(queue_queue_archive);
Datum
queue_queue_archive(PG_FUNCTION_ARGS)
{
	QueueInfo  *q;
	Oid			relid;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	QueueSpiBegin();
	q = readable_queue(PG_GETARG_INT32(0), "a_", &relid);
	if (q != NULL)
		read_queue_rows(fcinfo, q, relid,
						psprintf("SELECT a.id, a.state, a.payload, a.priority, a.run_at, a.attempt,"
								 " a.group_key, a.dedup_key, a.enqueued_at, a.claimed_at, a.finished_at,"
								 " a.last_error FROM %s a WHERE a.id %% " JOB_ID_FACTOR_SQL " = $1",
								 quote_qualified_identifier("queue", psprintf("a_%s", q->name))));
	QueueSpiEnd();
	return (Datum) 0;
}
