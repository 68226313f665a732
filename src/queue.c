/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  Module entry point: settings, hooks, and the small SQL-callable
 *	  helpers the extension script uses.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "queue.h"

PG_MODULE_MAGIC;

int			queue_max_payload_size = 1024 * 1024;
int			queue_max_queues = 1024;
int			queue_max_databases = 32;
int			queue_worker_naptime = 1000;
int			queue_notify_busy_interval = 20;

void		_PG_init(void);

void
_PG_init(void)
{
	DefineCustomIntVariable("queue.max_payload_size",
							"Largest payload accepted by queue.enqueue, in bytes.",
							"Larger payloads are refused with an error.",
							&queue_max_payload_size,
							1024 * 1024, 16, MaxAllocSize / 2,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queue.worker_naptime",
							"Longest time the background worker sleeps between upkeep passes.",
							"It also wakes when work comes due or producers commit; this bounds how late an expired lease is noticed.",
							&queue_worker_naptime,
							1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queue.notify_busy_interval",
							"Shortest time between notifications of a queue whose claims have all come back full since the last one.",
							"A consumer waits for a notification only after a claim that came back short, and such a claim has the worker notify at once; "
							"this bounds how late listeners that never claim hear of new jobs. 0 notifies for every commit.",
							&queue_notify_busy_interval,
							20, 0, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("queue.synchronous_claims",
							 "Whether a transaction that only claimed jobs waits for its commit to reach disk.",
							 "Off saves a consumer a WAL flush per claim; a crash may then undo a claim, uncounted and not in the job's history, and its jobs are ready again.",
							 &queue_synchronous_claims,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);

	/* first: its commit callback must run after everyone's writes (flush.c) */
	QueueFlushInit();
	QueueCacheInit();
	QueueXactInit();
	QueueHeldInit();
	QueueInsertInit();
	/* after QueueXactInit: its callbacks must run after lease.c's */
	QueueLeaseInit();

	/* What sizes shared memory can only be set when it is made. */
	if (!process_shared_preload_libraries_in_progress || IsBinaryUpgrade)
	{
		MarkGUCPrefixReserved("queue");
		return;
	}

	DefineCustomIntVariable("queue.max_queues",
							"Number of queues whose claim cursor and counters are kept in shared memory.",
							"Queues beyond this number still work, without the cursor.",
							&queue_max_queues,
							1024, 16, 1000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queue.max_leased_jobs",
							"Number of jobs that can be under batch leases at once.",
							"A claim of several jobs in a transaction of its own takes one lease for all of them while there is room; "
							"otherwise it marks each job running. 0 turns batch leases off.",
							&queue_max_leased_jobs,
							65536, 0, 100000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queue.max_databases",
							"Number of databases the background worker can serve.",
							NULL,
							&queue_max_databases,
							32, 1, 10000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);

	MarkGUCPrefixReserved("queue");

	QueueShmemRequest();
	QueueWorkerRegister();
	QueueUtilityHookInstall();
}

/*
 * Check what a statement on a queue's tables did: ret must be expected
 * and, unless want_rows < 0, it must have touched that many rows.  Only a
 * rule or trigger someone added to the tables can make it otherwise, so
 * the error names them rather than reporting an internal error.
 */
void
queue_spi_check(int ret, int expected, int64 want_rows, const char *what, const char *qname)
{
	if (ret == expected && (want_rows < 0 || SPI_processed == (uint64) want_rows))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not %s in queue \"%s\"", what, qname),
			 want_rows < 0 ?
			 errdetail("The statement returned %s.", SPI_result_code_string(ret)) :
			 errdetail("The statement returned %s for " UINT64_FORMAT " rows of " INT64_FORMAT ".",
					   SPI_result_code_string(ret), SPI_processed, want_rows),
			 errhint("A rule or trigger on the queue's tables rewrote the statement or skipped rows; drop it.")));
}

/*
 * Group and dedup keys are free text but bounded, so that a runaway key
 * cannot bloat the unique index.
 */
void
queue_check_key(const char *what, text *key)
{
	if (key != NULL && VARSIZE_ANY_EXHDR(key) > QUEUE_MAX_KEY_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s is too long", what),
				 errdetail("It has %d bytes; the limit is %d.",
						   (int) VARSIZE_ANY_EXHDR(key), QUEUE_MAX_KEY_LEN),
				 errhint("Use a shorter key, for example a hash of the long one.")));
}

/*
 * queue._invalidate(): make every backend reread queue_config after this
 * transaction commits.  The relcache message is transactional, which is
 * exactly when the new configuration becomes visible.
 */
PG_FUNCTION_INFO_V1(queue_invalidate);
Datum
queue_invalidate(PG_FUNCTION_ARGS)
{
	Oid			nsp = get_namespace_oid("queue", false);
	Oid			relid = get_relname_relid("queue_config", nsp);

	if (OidIsValid(relid))
		CacheInvalidateRelcacheByRelid(relid);
	PG_RETURN_VOID();
}

/*
 * Queue number qno and (*relid) its table, or an error.  Must be called
 * inside QueueSpiBegin.
 */
static QueueInfo *
queue_with_table(int32 qno, Oid *relid)
{
	QueueInfo  *q = QueueLookupByQno(qno, true);

	if (q == NULL || !OidIsValid(*relid = QueueTableRelid(q)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("queue number %d does not exist", qno),
				 errhint("List queues with SELECT * FROM queue.queues.")));
	return q;
}

/*
 * The internal functions that change a queue's shared state or take its
 * group locks are executable by everyone, since the SQL functions call
 * them as their caller.  Each first checks that the queue exists and that
 * the caller may write its table: whoever can could upset the queue
 * anyway, and nobody else may.  (A queue unknown here would still get
 * shared memory at commit, which anyone could then fill.)
 */
void
queue_check_writer(int32 qno)
{
	QueueInfo  *q;
	Oid			relid;

	QueueSpiBegin();
	q = queue_with_table(qno, &relid);
	QueueSpiEnd();
	if (pg_class_aclcheck(relid, GetUserId(), ACL_INSERT | ACL_UPDATE | ACL_DELETE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for queue \"%s\"", q->name),
				 errdetail("Changing the queue's shared state needs INSERT, UPDATE or DELETE on table queue.q_%s.",
						   q->name),
				 errhint("Use the queue's functions; ask its owner for privileges on its tables.")));
}

/*
 * Run as role, in a restricted operation with a safe search_path, until
 * QueueAsRoleEnd, which also undoes every setting changed meanwhile (by
 * the role's code, a trigger say), as VACUUM does around index
 * expressions.  Code of one role must never see, or leave behind, the
 * settings or rights of another.
 */
void
QueueAsRoleBegin(QueueAsRole *as, Oid role)
{
	GetUserIdAndSecContext(&as->save_userid, &as->save_sec);
	SetUserIdAndSecContext(role, as->save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	as->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

void
QueueAsRoleEnd(QueueAsRole *as)
{
	AtEOXact_GUC(false, as->save_nestlevel);
	SetUserIdAndSecContext(as->save_userid, as->save_sec);
}

/* The owner of a relation of queue name. */
Oid
QueueRelOwner(Oid relid, const char *name)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("a table of queue \"%s\" was dropped meanwhile", name),
				 errhint("Try again; if the queue was dropped, it is gone.")));
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Run a fixed statement on queue qno's row of queue_config, as the owner of
 * queue_config, for the owner of the queue's table.  Upkeep runs as that
 * owner, who may read queue_config but not lock or change it, and turning
 * the archive ring must do both.  Returns the rows processed.
 */
static uint64
config_statement(int32 qno, const char *sql, int expected, int nargs, Oid *types, Datum *values)
{
	Oid			config = get_relname_relid("queue_config", get_namespace_oid("queue", false));
	QueueInfo  *q;
	Oid			relid;
	QueueAsRole as;
	uint64		n;

	QueueSpiBegin();
	q = queue_with_table(qno, &relid);
	if (!pg_class_ownercheck(relid, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for queue \"%s\"", q->name),
				 errdetail("Turning the queue's archive ring needs ownership of its tables."),
				 errhint("Only the worker, and queue.tick() run by the owner of the queue's tables, turn it.")));
	QueueAsRoleBegin(&as, QueueRelOwner(config, q->name));
	queue_spi_check(SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0),
					expected, -1, "change the queue's configuration", q->name);
	n = SPI_processed;
	QueueAsRoleEnd(&as);
	QueueSpiEnd();
	return n;
}

/*
 * queue._lock_config(qno): lock the queue's configuration against alter(),
 * drop() and another upkeep; false if it is locked or gone.
 */
PG_FUNCTION_INFO_V1(queue_lock_config);
Datum
queue_lock_config(PG_FUNCTION_ARGS)
{
	Oid			types[1] = {INT4OID};
	Datum		values[1] = {PG_GETARG_DATUM(0)};

	PG_RETURN_BOOL(config_statement(PG_GETARG_INT32(0),
									"SELECT FROM queue.queue_config c WHERE c.qno = $1"
									" FOR NO KEY UPDATE SKIP LOCKED",
									SPI_OK_SELECT, 1, types, values) == 1);
}

/* queue._set_archive_seg(qno, seg, since): the archive ring turned */
PG_FUNCTION_INFO_V1(queue_set_archive_seg);
Datum
queue_set_archive_seg(PG_FUNCTION_ARGS)
{
	Oid			types[3] = {INT4OID, INT4OID, TIMESTAMPTZARRAYOID};
	Datum		values[3] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2)};

	if (config_statement(PG_GETARG_INT32(0),
						 "UPDATE queue.queue_config c SET archive_seg = $2, archive_since = $3"
						 " WHERE c.qno = $1 AND $2 >= 0 AND $2 < queue._archive_segments()"
						 " AND cardinality($3) = queue._archive_segments()",
						 SPI_OK_UPDATE, 3, types, values) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("archive segment %d, or its start times, do not fit the archive ring",
						PG_GETARG_INT32(1)),
				 errhint("The ring has queue._archive_segments() segments, numbered from 0.")));
	PG_RETURN_VOID();
}

/*
 * Whether queue qno exists but its table does not: it went without
 * queue.drop (DROP OWNED ... CASCADE dropped its owner's objects, or it
 * was dropped by hand).
 */
static bool
queue_table_missing(int32 qno)
{
	QueueInfo  *q;
	bool		missing;

	QueueSpiBegin();
	q = QueueLookupByQno(qno, true);
	missing = q != NULL && !OidIsValid(QueueTableRelid(q));
	QueueSpiEnd();
	return missing;
}

/*
 * queue._reset_cursor(qno, forget, keep_due): the calling transaction may
 * make jobs ready anywhere in the claim order, or holds locks on ready jobs
 * that a claim skips over; when it ends, either way, claims start again
 * from the front.  Its commit also forgets when the queue falls due next,
 * unless keep_due: the caller may have scheduled jobs earlier.  forget
 * (queue.drop) removes the queue's shared state at commit: for a queue
 * whose table is gone, whoever may delete its queue_config row may do
 * that, so that such a queue can still be dropped.
 */
PG_FUNCTION_INFO_V1(queue_reset_cursor);
Datum
queue_reset_cursor(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);
	bool		forget = PG_GETARG_BOOL(1);
	/* (a database whose extension script predates the argument) */
	bool		keep_due = PG_NARGS() > 2 && PG_GETARG_BOOL(2);

	if (forget && queue_table_missing(qno))
		QueueCheckConfigPrivilege(ACL_DELETE);
	else
		queue_check_writer(qno);
	QueueXactResetAtEnd(qno, forget, keep_due);
	PG_RETURN_VOID();
}

/*
 * queue._unskip_cursor(qno): the calling transaction may hold locks on
 * ready jobs that claims pass over (see promote_due in claim.c); when it
 * ends, either way, the cursor goes back to the first of them
 * (QueueCursorUnskip), where a reset would send claims to the front.
 */
PG_FUNCTION_INFO_V1(queue_unskip_cursor);
Datum
queue_unskip_cursor(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);

	queue_check_writer(qno);
	QueueXactUnskipAtEnd(qno);
	PG_RETURN_VOID();
}

/*
 * queue._tick_expire, _tick_promote, _tick_next_due and _tick_lease_due:
 * the statements of queue._tick_queue, as saved plans of the queue (see
 * qcache.c).  Argument 0 is the queue's number, the others are the plan's
 * parameters.  They run as the caller, as the dynamic SQL they replace
 * did, so that the caller's rights on the queue's tables apply.  Returns
 * the plan's one row (composite), or its first column (NULL for no row).
 */
static Datum
run_tick_plan(FunctionCallInfo fcinfo, QueuePlanId which, bool composite)
{
	Datum		args[8];
	char		nulls[8];
	int			nargs = PG_NARGS() - 1;
	QueueInfo  *q;
	Oid			relid;
	Datum		result = (Datum) 0;
	bool		isnull = true;

	Assert(nargs <= (int) lengthof(args));
	for (int i = 0; i < nargs; i++)
	{
		args[i] = PG_GETARG_DATUM(i + 1);
		nulls[i] = PG_ARGISNULL(i + 1) ? 'n' : ' ';
	}
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("queue number must not be null"),
				 errhint("List queues with SELECT * FROM queue.queues.")));
	QueueSpiBegin();
	q = queue_with_table(PG_GETARG_INT32(0), &relid);
	queue_spi_check(SPI_execute_plan(QueueGetPlan(q, which), args, nulls, false, 0),
					SPI_OK_SELECT, -1, "run upkeep", q->name);
	if (SPI_processed > 0 && composite)
	{
		result = PointerGetDatum(SPI_returntuple(SPI_tuptable->vals[0], SPI_tuptable->tupdesc));
		isnull = false;
	}
	else if (SPI_processed > 0)
	{
		result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		/* (out of SPI's memory, where timestamptz is passed by reference) */
		if (!isnull)
			result = SPI_datumTransfer(result, FLOAT8PASSBYVAL, sizeof(TimestampTz));
	}
	QueueSpiEnd();
	if (isnull)
		PG_RETURN_NULL();
	return result;
}

PG_FUNCTION_INFO_V1(queue_tick_expire);
Datum
queue_tick_expire(PG_FUNCTION_ARGS)
{
	return run_tick_plan(fcinfo, PLAN_TICK_EXPIRE, true);
}

/* queue._tick_promote: the claims' own promotion statement (PLAN_PROMOTE). */
PG_FUNCTION_INFO_V1(queue_tick_promote);
Datum
queue_tick_promote(PG_FUNCTION_ARGS)
{
	return run_tick_plan(fcinfo, PLAN_PROMOTE, true);
}

PG_FUNCTION_INFO_V1(queue_tick_next_due);
Datum
queue_tick_next_due(PG_FUNCTION_ARGS)
{
	return run_tick_plan(fcinfo, PLAN_TICK_NEXT_DUE, false);
}

PG_FUNCTION_INFO_V1(queue_tick_lease_due);
Datum
queue_tick_lease_due(PG_FUNCTION_ARGS)
{
	return run_tick_plan(fcinfo, PLAN_TICK_LEASE_DUE, false);
}

/*
 * queue._register(): called by CREATE EXTENSION.  Has the background
 * worker serve this database once the transaction commits, or says that
 * there is no worker.
 */
PG_FUNCTION_INFO_V1(queue_register);
Datum
queue_register(PG_FUNCTION_ARGS)
{
	if (QueueWakeActive())
		QueueXactRegisterDatabase(MyDatabaseId);
	else
		/* A WARNING: CREATE EXTENSION scripts run with NOTICEs hidden. */
		ereport(WARNING,
				(errmsg("the queue background worker is not running"),
				 errdetail("queue is not in shared_preload_libraries, so nothing returns expired leases, promotes scheduled jobs on time or notifies listeners."),
				 errhint("Add queue to shared_preload_libraries and restart, or call SELECT queue.tick() periodically.")));
	PG_RETURN_VOID();
}

/* queue._count(qno, from, to, n): n jobs changed state in SQL code */
PG_FUNCTION_INFO_V1(queue_count);
Datum
queue_count(PG_FUNCTION_ARGS)
{
	queue_check_writer(PG_GETARG_INT32(0));
	QueueXactCount(PG_GETARG_INT32(0),
				   QueueStateFromName(text_to_cstring(PG_GETARG_TEXT_PP(1))),
				   QueueStateFromName(text_to_cstring(PG_GETARG_TEXT_PP(2))),
				   PG_GETARG_INT64(3));
	PG_RETURN_VOID();
}

/* queue._new_queue(qno): this transaction created queue qno */
PG_FUNCTION_INFO_V1(queue_new_queue);
Datum
queue_new_queue(PG_FUNCTION_ARGS)
{
	queue_check_writer(PG_GETARG_INT32(0));
	QueueXactNewQueue(PG_GETARG_INT32(0));
	PG_RETURN_VOID();
}

/* queue._recount(qno): this transaction changed jobs wholesale */
PG_FUNCTION_INFO_V1(queue_recount);
Datum
queue_recount(PG_FUNCTION_ARGS)
{
	queue_check_writer(PG_GETARG_INT32(0));
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
	Datum		values[2 + QS_NSTATES];
	bool		nulls[2 + QS_NSTATES] = {0};
	int64		counts[QS_NSTATES] = {0};
	uint64		gen;
	bool		valid;

	valid = QueueCountsGet(PG_GETARG_INT32(0), counts, &gen);
	/* what this transaction changed shows to it, as its rows would */
	if (valid)
		QueueXactPendingCounts(PG_GETARG_INT32(0), counts);
	values[0] = BoolGetDatum(valid);
	values[1] = Int64GetDatum((int64) gen);
	for (int i = 0; i < QS_NSTATES; i++)
		values[2 + i] = Int64GetDatum(counts[i]);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * queue._set_counts(qno, gen, ready, scheduled, running, dead, waiting):
 * store a recount, unless changes were applied since gen was read or the
 * count's snapshot may predate it.
 */
PG_FUNCTION_INFO_V1(queue_set_counts);
Datum
queue_set_counts(PG_FUNCTION_ARGS)
{
	int64		counts[QS_NSTATES];

	queue_check_writer(PG_GETARG_INT32(0));
	if (IsolationUsesXactSnapshot())
		PG_RETURN_VOID();
	for (int i = 0; i < QS_NSTATES; i++)
		counts[i] = PG_GETARG_INT64(2 + i);
	QueueCountsSet(PG_GETARG_INT32(0), (uint64) PG_GETARG_INT64(1), counts);
	PG_RETURN_VOID();
}

/*
 * queue._table_stats(qno, with_counts): the age of the queue's oldest ready
 * job and, with with_counts, its jobs counted by state, read from its
 * table as the table's owner.  queue.stats runs with the extension
 * owner's rights, and a table's owner can make reading the table run code
 * of theirs (on PostgreSQL 15 a rule can turn an empty table into a view),
 * which must not run with those rights.  Like VACUUM and ANALYZE running
 * index expressions, the read runs as the owner, as a restricted operation
 * with a safe search_path.  NULLs for a queue that does not exist.
 */
PG_FUNCTION_INFO_V1(queue_table_stats);
Datum
queue_table_stats(PG_FUNCTION_ARGS)
{
	static const char *const states[QS_NSTATES] = {"ready", "scheduled", "running", "dead", "waiting"};
	TupleDesc	tupdesc = result_row_type(fcinfo);
	MemoryContext outer = CurrentMemoryContext;
	bool		with_counts = PG_GETARG_BOOL(1);
	Datum		values[QS_NSTATES + 1] = {0};
	bool		nulls[QS_NSTATES + 1];
	HeapTuple	result;
	MemoryContext old;
	QueueInfo  *q;
	Oid			relid = InvalidOid;

	for (int i = 0; i <= QS_NSTATES; i++)
		nulls[i] = true;
	QueueSpiBegin();
	q = QueueLookupByQno(PG_GETARG_INT32(0), true);
	if (q != NULL)
		relid = QueueTableRelid(q);
	if (OidIsValid(relid))
	{
		const char *t = quote_qualified_identifier("queue", psprintf("q_%s", q->name));
		const char *l = quote_qualified_identifier("queue", psprintf("l_%s", q->name));
		StringInfoData sql;
		QueueAsRole as;

		initStringInfo(&sql);
		appendStringInfoString(&sql, "SELECT ");
		/*
		 * In QueueState's order, which is the order of the result's
		 * columns.  Jobs under batch leases are ready rows at the attempt
		 * a lease lists, and running (lease.c).
		 */
		for (int i = 0; i < QS_NSTATES; i++)
		{
			if (!with_counts)
			{
				appendStringInfoString(&sql, "NULL::bigint, ");
				continue;
			}
			appendStringInfo(&sql, "(SELECT count(*) FROM %s WHERE state = '%s')", t, states[i]);
			if (i == QS_READY || i == QS_RUNNING)
				appendStringInfo(&sql,
								 " %s (SELECT count(*) FROM %s b CROSS JOIN LATERAL unnest(b.ids, b.attempts) AS u(id, attempt)"
								 " JOIN %s j ON j.id = u.id AND j.attempt = u.attempt AND j.state = 'ready')",
								 i == QS_READY ? "-" : "+", l, t);
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

		QueueAsRoleBegin(&as, QueueRelOwner(relid, q->name));
		queue_spi_check(SPI_execute(sql.data, true, 1), SPI_OK_SELECT, 1, "count jobs", q->name);
		for (int i = 0; i <= QS_NSTATES; i++)
			values[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &nulls[i]);
		QueueAsRoleEnd(&as);
	}
	/* (the tuple copies the interval out of SPI's memory) */
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

	if (QueueRecentCounts(PG_GETARG_INT32(0), &completed, &failed))
	{
		values[0] = Int64GetDatum(completed);
		values[1] = Int64GetDatum(failed);
	}
	else
		nulls[0] = nulls[1] = true;

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
