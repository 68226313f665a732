/*-------------------------------------------------------------------------
 *
 * utility.c
 *	  The ProcessUtility hook: LISTEN and UNLISTEN on queue channels
 *	  (xact/listen.c), DROP EXTENSION queue (xact/leases.c), and commands
 *	  that need a database's worker gone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "tcop/utility.h"
#include "utils/timestamp.h"

#include "module/utility.h"
#include "shmem/databases.h"
#include "shmem/leasemap.h"
#include "shmem/queuestate.h"
#include "xact/leases.h"
#include "xact/listen.h"
#include "xact/xact.h"

/* How long a database's worker stays away after such a command. */
#define STOP_MS		10000

static ProcessUtility_hook_type prev_process_utility = NULL;

/*
 * Commands that need a database to have no connections (DROP DATABASE,
 * renaming it, using it as a template, moving it to another tablespace)
 * would otherwise wait for, and then fail because of, its worker.
 */
static void
queue_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					  ProcessUtilityContext context, ParamListInfo params,
					  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	const char *dbname = NULL;
	Oid			db = InvalidOid;
	ListCell   *lc;

	QueueListenUtility(parsetree);
	if (IsA(parsetree, DropStmt) &&
		(((DropStmt *) parsetree)->removeType == OBJECT_EXTENSION ||
		 ((DropStmt *) parsetree)->removeType == OBJECT_SCHEMA))
	{
		foreach(lc, ((DropStmt *) parsetree)->objects)
			if (IsA(lfirst(lc), String) && strcmp(strVal(lfirst(lc)), "queue") == 0)
				QueueLeaseDroppingExtension();
	}
	if (IsA(parsetree, DropdbStmt))
		dbname = ((DropdbStmt *) parsetree)->dbname;
	else if (IsA(parsetree, RenameStmt) &&
			 ((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
		dbname = ((RenameStmt *) parsetree)->subname;
	else if (IsA(parsetree, CreatedbStmt))
	{
		dbname = "template1";
		foreach(lc, ((CreatedbStmt *) parsetree)->options)
			if (strcmp(lfirst_node(DefElem, lc)->defname, "template") == 0)
				dbname = defGetString(lfirst_node(DefElem, lc));
	}
	else if (IsA(parsetree, AlterDatabaseStmt))
	{
		foreach(lc, ((AlterDatabaseStmt *) parsetree)->options)
			if (strcmp(lfirst_node(DefElem, lc)->defname, "tablespace") == 0)
				dbname = ((AlterDatabaseStmt *) parsetree)->dbname;
	}

	if (dbname != NULL)
	{
		db = get_database_oid(dbname, true);
		if (OidIsValid(db))
			QueueDbWorkerStop(db, GetCurrentTimestamp() + STOP_MS * INT64CONST(1000));
	}

	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
							 queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);

	/* What shared memory holds of a dropped database's queues goes with it. */
	if (IsA(parsetree, DropdbStmt) && OidIsValid(db))
	{
		LeaseMapForget(db, 0);
		QueueStateForgetDatabase(db);
	}

	/*
	 * A database copied from a template may have the extension: have its
	 * worker look (it leaves if not) once the new database is committed.
	 */
	if (IsA(parsetree, CreatedbStmt))
	{
		db = get_database_oid(((CreatedbStmt *) parsetree)->dbname, true);
		if (OidIsValid(db))
			QueueXactRegisterDatabase(db);
	}
}

void
QueueUtilityHookInstall(void)
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = queue_process_utility;
}
