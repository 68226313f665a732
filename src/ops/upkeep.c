/*-------------------------------------------------------------------------
 *
 * upkeep.c
 *	  The small SQL functions the extension script's management and upkeep
 *	  functions use: the queue cache and cursor, the archive ring's
 *	  configuration, the statements of queue._tick_queue, the worker's
 *	  registration, and sessions that claimed jobs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"

#include "base/errors.h"
#include "base/role.h"
#include "catalog/acl.h"
#include "catalog/plans.h"
#include "catalog/spi.h"
#include "shmem/databases.h"
#include "shmem/owners.h"
#include "xact/held.h"
#include "xact/pending.h"
#include "xact/xact.h"

/*
 * queue._config_changed(), the statement trigger on queue_config and
 * queue_grants: make every backend reread them after this transaction
 * commits.  The relcache message is transactional, which is exactly when
 * the new configuration becomes visible.  Only a change to either sends it.
 */
PG_FUNCTION_INFO_V1(queue_config_changed);
Datum
queue_config_changed(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("queue._config_changed() can only be called as a trigger"),
				 errhint("Changes to queue.queue_config call it.")));
	/* (queue_grants has it too: the cache is keyed on queue_config) */
	CacheInvalidateRelcacheByRelid(QueueConfigRelid());
	return PointerGetDatum(NULL);
}

/*
 * queue._invalidate() of the install scripts of 0.1 and 0.2, which their
 * functions call until ALTER EXTENSION queue UPDATE replaces them; 0.3
 * has no such function.
 */
PG_FUNCTION_INFO_V1(queue_invalidate);
Datum
queue_invalidate(PG_FUNCTION_ARGS)
{
	CacheInvalidateRelcacheByRelid(QueueConfigRelid());
	PG_RETURN_VOID();
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
	Oid			config = QueueConfigRelid();
	QueueInfo  *q;
	Oid			relid;
	QueueAsRole as;
	uint64		n;

	QueueSpiBegin();
	q = QueueWithTable(qno, &relid);
	if (!pg_class_ownercheck(relid, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for queue \"%s\"", q->name),
				 errdetail("Turning the queue's archive ring needs ownership of its tables."),
				 errhint("Only the worker, and queue.tick() run by the owner of the queue's tables, turn it.")));
	QueueAsRoleInScopeBegin(&as, QueueRelOwner(config, q->name));
	QueueCheckSpi(SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0),
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
		QueueCheckWriter(qno);
	QueueXactResetAtEnd(qno, forget, keep_due);
	PG_RETURN_VOID();
}

/*
 * queue._unskip_cursor(qno): the calling transaction may hold locks on
 * ready jobs that claims pass over (see promote_due in ops/claim.c); when it
 * ends, either way, the cursor goes back to the first of them
 * (QueueCursorUnskip), where a reset would send claims to the front.
 */
PG_FUNCTION_INFO_V1(queue_unskip_cursor);
Datum
queue_unskip_cursor(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);

	QueueCheckWriter(qno);
	QueueXactUnskipAtEnd(qno);
	PG_RETURN_VOID();
}

/*
 * queue._tick_expire, _tick_promote, _tick_next_due and _tick_lease_due:
 * the statements of queue._tick_queue, as saved plans of the queue (see
 * catalog/plans.c).  Argument 0 is the queue's number, the others are the plan's
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
	q = QueueWithTable(PG_GETARG_INT32(0), &relid);
	QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, which), args, nulls, false, 0),
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
	if (QueueDbActive())
		QueueXactRegisterDatabase(MyDatabaseId);
	else
		/* A WARNING: CREATE EXTENSION scripts run with NOTICEs hidden. */
		ereport(WARNING,
				(errmsg("the queue background worker is not running"),
				 errdetail("queue is not in shared_preload_libraries, so nothing returns expired leases, promotes scheduled jobs on time or notifies listeners."),
				 errhint("Add queue to shared_preload_libraries and restart, or call SELECT queue.tick() periodically.")));
	PG_RETURN_VOID();
}


/*
 * queue._owner_alive(pid, started): is the session that claimed with this
 * pid and start time alive (shmem/owners.c)?
 */
PG_FUNCTION_INFO_V1(queue_owner_alive);
Datum
queue_owner_alive(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(QueueOwnerAlive(PG_GETARG_INT32(0), PG_GETARG_TIMESTAMPTZ(1)));
}

/* queue._write_back(): management functions see every job as a row (xact/held.c). */
PG_FUNCTION_INFO_V1(queue_write_back);
Datum
queue_write_back(PG_FUNCTION_ARGS)
{
	if (QueueHeldJobs() != NIL)
	{
		QueueSpiBegin();
		QueueHeldWriteBackAll();
		QueueSpiEnd();
	}
	PG_RETURN_VOID();
}
