/*-------------------------------------------------------------------------
 *
 * front.c
 *	  The API functions written in PL/pgSQL, called as the role they must
 *	  run as.
 *
 * queue.alter, pause, resume, purge, history, reschedule, cancel, retry,
 * create, drop and set_owner are C functions that check the caller's
 * privilege on the queue and then call the extension script's
 * queue._<name> function, with the same arguments, as the role the work
 * needs: the queue's owner for what touches its tables (so that no
 * role needs rights on them, and code of theirs, a trigger say, runs with
 * their rights and nobody else's), the owner of the extension's tables for
 * creating, dropping and handing on queues, which no table of a role takes
 * part in.  A PL/pgSQL function cannot do this itself: SECURITY DEFINER
 * loses who called it.  The _<name> functions are not executable by
 * PUBLIC; a call through fmgr checks no privilege.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/twophase.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "parser/parse_func.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"

#include "base/errors.h"
#include "catalog/acl.h"
#include "catalog/spi.h"

/* Who must the caller be (beyond a superuser)? */
#define MUST_OWN	(-1)		/* the queue's owner */

/* Function queue.name with these argument types. */
static Oid
queue_function(const char *name, int nargs, const Oid *argtypes)
{
	return LookupFuncName(stringToQualifiedNameList(psprintf("queue.%s", name)), nargs, argtypes, false);
}

/* The internal function a front calls, kept with the front's FmgrInfo. */
static FmgrInfo *
target(FunctionCallInfo fcinfo)
{
	FmgrInfo   *flinfo = fcinfo->flinfo;

	if (flinfo->fn_extra == NULL)
	{
		Oid		   *argtypes;
		int			nargs;
		Oid			rettype = get_func_signature(flinfo->fn_oid, &argtypes, &nargs);
		char	   *name = psprintf("_%s", get_func_name(flinfo->fn_oid));
		Oid			fn = queue_function(name, nargs, argtypes);
		FmgrInfo   *t = MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(FmgrInfo));

		if (get_func_rettype(fn) != rettype)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("function queue.%s does not return the type of %s", name,
							format_procedure(flinfo->fn_oid)),
					 errhint("It was changed by hand; reinstall the extension.")));
		fmgr_info_cxt(fn, t, flinfo->fn_mcxt);
		flinfo->fn_extra = t;
	}
	return (FmgrInfo *) flinfo->fn_extra;
}

/* Call the front's internal function with the front's arguments. */
static Datum
call_target(FunctionCallInfo fcinfo, MemoryContext cxt)
{
	FunctionCallInfo inner = palloc0(SizeForFunctionCallInfo(fcinfo->nargs));
	FmgrInfo   *t = target(fcinfo);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	Datum		result;

	InitFunctionCallInfoData(*inner, t, fcinfo->nargs, fcinfo->fncollation, NULL, fcinfo->resultinfo);
	for (int i = 0; i < fcinfo->nargs; i++)
		inner->args[i] = fcinfo->args[i];
	result = FunctionCallInvoke(inner);
	fcinfo->isnull = inner->isnull;
	MemoryContextSwitchTo(old);
	return result;
}

/*
 * The front of a function on queue q: an error unless the caller has priv
 * on it (MUST_OWN: owns it); then the internal function runs as the
 * queue's owner, or, with as_catalog_owner, as the owner of the
 * extension's tables.
 */
static Datum
front(FunctionCallInfo fcinfo, QueueInfo *q, int priv, int64 id, bool as_catalog_owner)
{
	MemoryContext cxt = CurrentMemoryContext;
	Datum		result;

	QueueSpiBegin();
	if (priv == MUST_OWN)
	{
		if (!QueueOwns(q, GetUserId()))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be owner of queue \"%s\"", q->name),
					 errhint("Only the owner of table queue.q_%s and superusers may do this.", q->name)));
	}
	else
		QueueOpen(q, priv, id);
	if (as_catalog_owner)
		QueueRunAsCatalogOwner();
	result = call_target(fcinfo, cxt);
	QueueSpiEnd();
	return result;
}

/* The queue named by argument 0 (an error if there is none). */
static QueueInfo *
named_queue(FunctionCallInfo fcinfo)
{
	QueueInfo  *q;

	QueueSpiBegin();
	q = QueueLookupByName(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0));
	QueueSpiEnd();
	return q;
}

/* The queue of the job whose id is argument 0. */
static QueueInfo *
job_queue(FunctionCallInfo fcinfo)
{
	QueueInfo  *q;

	QueueCheckNotNull(PG_ARGISNULL(0), "job id", "Pass the id returned by queue.enqueue() or queue.claim().");
	QueueSpiBegin();
	q = QueueLookupById(PG_GETARG_INT64(0), false);
	QueueSpiEnd();
	return q;
}

#define NAME_FRONT(fn, priv) \
PG_FUNCTION_INFO_V1(fn); \
Datum fn(PG_FUNCTION_ARGS) { return front(fcinfo, named_queue(fcinfo), priv, 0, false); }

#define JOB_FRONT(fn, priv) \
PG_FUNCTION_INFO_V1(fn); \
Datum fn(PG_FUNCTION_ARGS) { return front(fcinfo, job_queue(fcinfo), priv, PG_GETARG_INT64(0), false); }

NAME_FRONT(queue_alter, QUEUE_MANAGE)
NAME_FRONT(queue_pause, QUEUE_MANAGE)
NAME_FRONT(queue_resume, QUEUE_MANAGE)
NAME_FRONT(queue_purge, QUEUE_MANAGE)
JOB_FRONT(queue_history, QUEUE_READ)
JOB_FRONT(queue_reschedule, QUEUE_MANAGE)
JOB_FRONT(queue_cancel, QUEUE_MANAGE)
JOB_FRONT(queue_retry, QUEUE_MANAGE)

/* queue.drop(queue, if_exists): the owner's, for a queue that exists */
PG_FUNCTION_INFO_V1(queue_drop);
Datum
queue_drop(PG_FUNCTION_ARGS)
{
	MemoryContext cxt = CurrentMemoryContext;
	QueueInfo  *q = NULL;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || !PG_GETARG_BOOL(1))
		q = named_queue(fcinfo);
	else
	{
		/* if_exists: a queue that is not there is the internal function's to report */
		QueueSpiBegin();
		q = QueueLookupByNameIfExists(PG_GETARG_TEXT_PP(0));
		QueueSpiEnd();
		if (q == NULL)
			return call_target(fcinfo, cxt);
	}
	return front(fcinfo, q, MUST_OWN, 0, true);
}

/*
 * queue.set_owner(queue, owner): the owner's, who must also be able to
 * become the new owner (as for ALTER TABLE OWNER TO).
 */
PG_FUNCTION_INFO_V1(queue_set_owner);
Datum
queue_set_owner(PG_FUNCTION_ARGS)
{
	QueueInfo  *q = named_queue(fcinfo);

	QueueCheckNotNull(PG_ARGISNULL(1), "owner", "Pass the role that is to own the queue's tables.");
	if (!superuser() && !is_member_of_role(GetUserId(), PG_GETARG_OID(1)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be able to SET ROLE \"%s\"", GetUserNameFromId(PG_GETARG_OID(1), false)),
				 errhint("Only a member of the new owner may give it a queue.")));
	return front(fcinfo, q, MUST_OWN, 0, true);
}

/*
 * Whether queue qname has a row in queue_config, and (*ours) whether this
 * transaction made it.
 */
static bool
config_row(Datum qname, bool *ours)
{
	Oid			argtype = TEXTOID;
	bool		isnull;

	QueueCheckSpi(SPI_execute_with_args("SELECT xmin FROM queue.queue_config WHERE name OPERATOR(pg_catalog.=) $1",
										1, &argtype, &qname, NULL, false, 1),
				  SPI_OK_SELECT, -1, "read its configuration", "");
	*ours = SPI_processed == 1 &&
		TransactionIdIsCurrentTransactionId(DatumGetTransactionId(SPI_getbinval(SPI_tuptable->vals[0],
																				 SPI_tuptable->tupdesc, 1, &isnull)));
	return SPI_processed == 1;
}

/*
 * Locks a queue.create takes until its transaction ends: its tables,
 * indexes, TOAST tables and types (70, measured in pg_locks).
 */
#define LOCKS_PER_CREATE	70

/* queue.create calls of the current transaction that made a queue */
static LocalTransactionId creates_lxid = InvalidLocalTransactionId;
static int	creates_in_xact = 0;

/*
 * A queue is about to be made: an error if this transaction has made as
 * many as half the server's lock table holds.  The lock table is shared
 * by every session, and a transaction making hundreds of queues filled it:
 * it failed with "out of shared memory", and so did every other session
 * that needed a lock meanwhile.  The other half is left to them.
 * (Creates rolled back to a savepoint are still counted.)
 */
static void
count_create(void)
{
	int			limit = Max(1, max_locks_per_xact * (MaxBackends + max_prepared_xacts) / 2 / LOCKS_PER_CREATE);

	if (creates_lxid != MyProc->lxid)
	{
		creates_lxid = MyProc->lxid;
		creates_in_xact = 0;
	}
	if (creates_in_xact >= limit)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("a transaction can create at most %d queues at max_locks_per_transaction = %d",
						limit, max_locks_per_xact),
				 errdetail("A queue's tables hold about %d locks until the transaction ends, in the lock table "
						   "that every session shares; half of it is kept for the other sessions.",
						   LOCKS_PER_CREATE),
				 errhint("Commit after every %d queues, or raise max_locks_per_transaction (needs a restart).",
						 limit)));
	creates_in_xact++;
}

/*
 * queue.create(queue, ...): whoever may execute it (superusers, and the
 * roles it was granted to).  A role other than a superuser gets a queue
 * whose tables it owns: they are made as the owner of the extension's
 * tables and handed to it.  (With if_not_exists, a queue that was there
 * already stays as it is, even one made earlier in the same transaction.)
 * A transaction can make only so many (count_create).
 */
PG_FUNCTION_INFO_V1(queue_create);
Datum
queue_create(PG_FUNCTION_ARGS)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			caller = GetUserId();
	bool		is_super = superuser();
	Datum		result;
	bool		existed;
	bool		ours;

	QueueSpiBegin();
	if (!is_super)
		QueueRunAsCatalogOwner();
	existed = !PG_ARGISNULL(0) && config_row(PG_GETARG_DATUM(0), &ours);
	if (!existed)
		count_create();
	if (is_super)
	{
		QueueSpiEnd();
		return call_target(fcinfo, cxt);
	}
	result = call_target(fcinfo, cxt);
	if (!existed && config_row(PG_GETARG_DATUM(0), &ours) && ours)
		OidFunctionCall2(queue_function("_set_owner", 2, (Oid[]) {TEXTOID, REGROLEOID}),
						 PG_GETARG_DATUM(0), ObjectIdGetDatum(caller));
	QueueSpiEnd();
	return result;
}
