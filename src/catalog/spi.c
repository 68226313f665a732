/*-------------------------------------------------------------------------
 *
 * spi.c
 *	  The scope every statement of ours runs in: SPI with search_path
 *	  pinned, the role the work runs as, and generic plans without
 *	  sequential scans.
 *
 * All SPI work runs with search_path pinned to pg_catalog (and no pg_temp),
 * so neither a caller's search_path nor objects it created can change what
 * our statements mean, and saved plans are never replanned for a change of
 * search_path.
 *
 * A scope remembers who called it.  Once the caller has been found to
 * have a privilege on a queue (catalog/acl.c), the rest of the scope runs
 * as the owner of the queue's tables (QueueSpiRunAs), the way a SECURITY
 * DEFINER function runs as its owner: roles need no rights on the tables
 * themselves.  The scope's end gives the caller its identity back, and an
 * error gives it back through the (sub)transaction's abort.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "optimizer/cost.h"
#include "optimizer/planner.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "catalog/spi.h"

/* An open QueueSpiBegin scope. */
typedef struct SpiScope
{
	int			xact_nest;		/* the (sub)transaction it was opened in */
	Oid			caller;			/* the user when it was opened */
	int			caller_sec;
	bool		switched;		/* runs as another role (QueueSpiRunAs) */
	int			guc_nest;		/* settings to undo at its end, or -1 */
} SpiScope;

static OverrideSearchPath *pinned_path = NULL;
static SpiScope *scopes = NULL;
static int	spi_depth = 0;		/* QueueSpiBegin scopes open */
static int	scopes_size = 0;
static planner_hook_type prev_planner_hook = NULL;

static PlannedStmt *queue_planner(Query *parse, const char *query_string,
								  int cursor_options, ParamListInfo bound_params);

void
QueueSpiInit(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = queue_planner;
}

/*
 * Connect to SPI with search_path pinned.  The override is popped by
 * QueueSpiEnd, or by transaction abort if an error intervenes.
 */
void
QueueSpiBegin(void)
{
	if (pinned_path == NULL)
	{
		pinned_path = MemoryContextAllocZero(TopMemoryContext, sizeof(OverrideSearchPath));
		pinned_path->schemas = NIL;
		pinned_path->addCatalog = true;
		pinned_path->addTemp = false;
	}
	if (spi_depth == scopes_size)
	{
		scopes_size = Max(8, scopes_size * 2);
		scopes = scopes == NULL ?
			MemoryContextAlloc(TopMemoryContext, scopes_size * sizeof(SpiScope)) :
			repalloc(scopes, scopes_size * sizeof(SpiScope));
	}
	scopes[spi_depth].xact_nest = GetCurrentTransactionNestLevel();
	GetUserIdAndSecContext(&scopes[spi_depth].caller, &scopes[spi_depth].caller_sec);
	scopes[spi_depth].switched = false;
	scopes[spi_depth].guc_nest = -1;
	SPI_connect();
	PushOverrideSearchPath(pinned_path);
	spi_depth++;
}

void
QueueSpiEnd(void)
{
	SpiScope   *s;

	Assert(spi_depth > 0);
	s = &scopes[--spi_depth];
	if (s->guc_nest >= 0)
		AtEOXact_GUC(false, s->guc_nest);
	if (s->switched)
		SetUserIdAndSecContext(s->caller, s->caller_sec);
	PopOverrideSearchPath();
	SPI_finish();
}

/* The role that opened the innermost scope: whose privileges count. */
Oid
QueueSpiCaller(void)
{
	Assert(spi_depth > 0);
	return scopes[spi_depth - 1].caller;
}

/*
 * Run the rest of the innermost scope as role (role_is_superuser: whether
 * it is one, which the caller knows).  A restricted operation,
 * as maintenance commands run a table owner's code: what the role's code
 * (a trigger on its table) does cannot reach the caller's session.  For a
 * role other than a superuser, settings changed meanwhile are undone at
 * the scope's end too; a superuser's code is trusted, and the hot path
 * pays nothing for it.
 */
void
QueueSpiRunAs(Oid role, bool role_is_superuser)
{
	SpiScope   *s;

	Assert(spi_depth > 0);
	s = &scopes[spi_depth - 1];
	if (role == GetUserId())
		return;
	SetUserIdAndSecContext(role, s->caller_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	s->switched = true;
	if (s->guc_nest < 0 && !role_is_superuser)
		s->guc_nest = NewGUCNestLevel();
}

/*
 * A subtransaction was aborted: the scopes it opened are gone (its abort
 * gave back the user, the settings and the search_path).
 */
void
QueueSpiAtSubAbort(int nest)
{
	while (spi_depth > 0 && scopes[spi_depth - 1].xact_nest >= nest)
		spi_depth--;
}

/* The transaction ended: scopes an error left open are closed. */
void
QueueSpiAtEOXact(void)
{
	spi_depth = 0;
}

/* The planner we stand in front of. */
static PlannedStmt *
plan_on(Query *parse, const char *query_string, int cursor_options, ParamListInfo bound_params)
{
	if (prev_planner_hook != NULL)
		return prev_planner_hook(parse, query_string, cursor_options, bound_params);
	return standard_planner(parse, query_string, cursor_options, bound_params);
}

/*
 * Plan our saved statements without sequential scans.  Every one of them
 * has an index that serves it, but the plan cache replans a saved plan
 * whenever something invalidates it, autovacuum's update of the table's
 * pg_class row included, and the planner goes by the table's size at that
 * moment.  A queue is often empty then, and for an empty table a
 * sequential scan is the cheapest plan: it stayed in use while a backlog
 * of 20,000 jobs built up, and every promotion, fail, release and enqueue
 * into a group read the whole table (sql/plans.sql).
 *
 * Our plans are the generic ones (QueueGetPlan in catalog/plans.c)
 * planned inside QueueSpiBegin; anything else planned there, such as a
 * statement of a trigger on a queue's table, is planned as usual.  Setting
 * enable_seqscan through the GUC machinery instead, around every call,
 * took a tenth of the CPU of enqueue() called in a loop; here only
 * planning pays, and rarely.  An error inside a scope leaves spi_depth
 * behind until the transaction ends, which only matters to other generic
 * plans made meanwhile.
 */
static PlannedStmt *
queue_planner(Query *parse, const char *query_string, int cursor_options,
			  ParamListInfo bound_params)
{
	bool		save = enable_seqscan;
	PlannedStmt *result = NULL;

	if (spi_depth == 0 || (cursor_options & CURSOR_OPT_GENERIC_PLAN) == 0)
		return plan_on(parse, query_string, cursor_options, bound_params);

	enable_seqscan = false;
	PG_TRY();
	{
		result = plan_on(parse, query_string, cursor_options, bound_params);
	}
	PG_FINALLY();
	{
		enable_seqscan = save;
	}
	PG_END_TRY();
	return result;
}

/*
 * Run plan on the latest snapshot, also under REPEATABLE READ: for what is
 * read like a catalog (queue_config) or is the queue's own bookkeeping
 * (slots, leases), where the transaction's snapshot would see old rows, or
 * make every row changed since it was taken a serialization failure.
 */
int
QueueExecuteLatest(SPIPlanPtr plan, Datum *args, bool read_only, long count)
{
	return SPI_execute_snapshot(plan, args, NULL, GetLatestSnapshot(), InvalidSnapshot,
								read_only, true, count);
}

/*
 * Run the text sql (with at most one argument, a bigint[]) on the latest
 * snapshot; returns SPI's result.  For statements that name tables looked
 * up at run time, run once.
 */
int
QueueExecuteSqlLatest(const char *sql, Datum *arg, bool read_only, long count)
{
	Oid			argtype = INT8ARRAYOID;
	SPIPlanPtr	plan = SPI_prepare(sql, arg != NULL ? 1 : 0, &argtype);
	int			ret;

	/* (a failure's code goes to the caller's QueueCheckSpi) */
	if (plan == NULL)
		return SPI_result;
	ret = QueueExecuteLatest(plan, arg, read_only, count);
	SPI_freeplan(plan);
	return ret;
}
