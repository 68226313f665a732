/*-------------------------------------------------------------------------
 *
 * role.c
 *	  Running code as another role: the owner of a queue's tables, for its
 *	  upkeep and bookkeeping.
 *
 * Code of one role must never see, or leave behind, the settings or rights
 * of another.  So the switch is a restricted operation with a safe
 * search_path, and its end undoes every setting changed meanwhile (by the
 * role's code, a trigger say), as VACUUM does around index expressions.
 * Inside an SPI scope of ours, which pins search_path already, the lighter
 * QueueAsRoleInScopeBegin does the rest (catalog/spi.c's QueueSpiRunAs is
 * the same for a whole scope).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/resowner.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/syscache.h"

#include "base/role.h"
#include "base/settings.h"

/* how often a cancelled owner's code is cancelled again */
#define OWNER_TIMEOUT_REPEAT_MS	100

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

/*
 * The same where search_path is pinned already (inside QueueSpiBegin):
 * settings are undone only for a role other than a superuser, whose code
 * the session must not trust, and nothing at all happens for the current
 * user.  The hot path runs the lease table's statements this way.
 */
void
QueueAsRoleInScopeBegin(QueueAsRole *as, Oid role)
{
	GetUserIdAndSecContext(&as->save_userid, &as->save_sec);
	as->save_nestlevel = -1;
	if (role == as->save_userid)
		return;
	SetUserIdAndSecContext(role, as->save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (!superuser_arg(role))
		as->save_nestlevel = NewGUCNestLevel();
}

/* Ends QueueAsRoleBegin and QueueAsRoleInScopeBegin. */
void
QueueAsRoleEnd(QueueAsRole *as)
{
	if (as->save_nestlevel >= 0)
		AtEOXact_GUC(false, as->save_nestlevel);
	SetUserIdAndSecContext(as->save_userid, as->save_sec);
}

/* The owner of relation relid, a table of queue qname. */
Oid
QueueRelOwner(Oid relid, const char *qname)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("a table of queue \"%s\" was dropped meanwhile", qname),
				 errhint("Try again; if the queue was dropped, it is gone.")));
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Bound what code of a queue's owner (a trigger on its tables) may take in
 * the background worker: the statement timeout cancels it after
 * queue.upkeep_timeout, and again every 100 ms in case it catches the
 * cancel.  QueueOwnerTimeoutCheck raises an error if it ran that long, so
 * that code that caught a cancel and went on still counts as too slow.
 */
static TimestampTz owner_code_start = 0;

/* Whether the worker is running code of a queue's owner now. */
volatile sig_atomic_t QueueInOwnerCode = false;

void
QueueOwnerTimeoutBegin(void)
{
	owner_code_start = GetCurrentTimestamp();
	QueueInOwnerCode = true;
	enable_timeout_every(STATEMENT_TIMEOUT,
						 TimestampTzPlusMilliseconds(owner_code_start, queue_upkeep_timeout),
						 OWNER_TIMEOUT_REPEAT_MS);
}

/* Ends QueueOwnerTimeoutBegin, if it began; whether the code ran too long. */
static bool
owner_timeout_end(void)
{
	if (!QueueInOwnerCode)
		return false;
	QueueInOwnerCode = false;
	disable_timeout(STATEMENT_TIMEOUT, false);
	return GetCurrentTimestamp() >= TimestampTzPlusMilliseconds(owner_code_start, queue_upkeep_timeout);
}

/* Ends QueueOwnerTimeoutBegin: an error (a cancel) if what took too long. */
void
QueueOwnerTimeoutCheck(const char *what)
{
	if (owner_timeout_end())
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("%s took longer than queue.upkeep_timeout", what)));
}

/*
 * Run fn(arg) in a subtransaction of its own, which is kept if keep and
 * fn went through, and rolled back otherwise: NULL if fn went through, or
 * the error it raised, with the user, memory context and resource owner
 * as they were (and an owner's timeout ended).
 */
static ErrorData *
run_in_subxact(void (*fn) (void *arg), void *arg, bool keep)
{
	MemoryContext outer = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	Oid			save_userid;
	int			save_sec;
	ErrorData  *volatile edata = NULL;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		fn(arg);
		if (keep)
			ReleaseCurrentSubTransaction();
		else
			RollbackAndReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		(void) owner_timeout_end();
		SetUserIdAndSecContext(save_userid, save_sec);
		MemoryContextSwitchTo(outer);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(outer);
	CurrentResourceOwner = oldowner;
	return edata;
}

/*
 * Run fn(arg) in a subtransaction of its own, so that what it runs of a
 * queue's owner cannot break what comes after: NULL if it went through,
 * or the error it raised, with the subtransaction rolled back.
 */
ErrorData *
QueueRunInSubxact(void (*fn) (void *arg), void *arg)
{
	return run_in_subxact(fn, arg, true);
}

/*
 * Run fn(arg), which only reads, in a subtransaction that is then rolled
 * back, so that the locks it took are given back at once: a statement
 * reading every queue one by one holds the locks of one queue at a time.
 * The server's lock table is shared by every session, and a statement
 * holding every queue's locks made other sessions fail with "out of
 * shared memory" once there were a few thousand queues.  What fn keeps
 * must live in a memory context of the caller's.  An error it raised is
 * raised again once the subtransaction is gone.
 */
void
QueueReadInSubxact(void (*fn) (void *arg), void *arg)
{
	ErrorData  *edata = run_in_subxact(fn, arg, false);

	if (edata != NULL)
		ReThrowError(edata);
}
