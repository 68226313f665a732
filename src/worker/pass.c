/*-------------------------------------------------------------------------
 *
 * pass.c
 *	  A database worker's passes: each is a transaction, held against DROP
 *	  EXTENSION; and the invalidations after which what the worker keeps
 *	  between passes (channels, the list of queues) must be learnt again.
 *
 * What the worker keeps of queue_config (channels, the list of queues) is
 * learnt again when its relcache entry is invalidated, as queue.create,
 * alter and drop do and DROP EXTENSION does; the invalidation is taken in
 * when a pass starts its transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "worker/pass.h"

static Oid	config_relid = InvalidOid;	/* queue_config, when learnt */
static uint64 config_changes = 1;	/* invalidations of queue_config */

static void
config_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == config_relid)
		config_changes++;
}

void
WorkerPassInit(void)
{
	CacheRegisterRelcacheCallback(config_relcache_callback, (Datum) 0);
}

/* Moves whenever queue_config may have changed. */
uint64
WorkerConfigChanges(void)
{
	return config_changes;
}

/* Where queue_config is now; in a pass. */
void
WorkerLearnConfig(void)
{
	config_relid = get_relname_relid("queue_config", get_namespace_oid("queue", false));
}

/* A pass is a transaction. */
void
WorkerPassStart(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	pgstat_report_activity(STATE_RUNNING, activity);
}

/*
 * In a started pass: hold the extension against DROP EXTENSION, and
 * connect to SPI with a snapshot.  Returns false, with the transaction
 * aborted, if the extension is gone.
 */
bool
WorkerPassOpen(void)
{
	Oid			ext = get_extension_oid("queue", true);

	if (OidIsValid(ext))
	{
		LockDatabaseObject(ExtensionRelationId, ext, 0, AccessShareLock);
		ext = get_extension_oid("queue", true);
	}
	if (!OidIsValid(ext))
	{
		AbortCurrentTransaction();
		return false;
	}
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	return true;
}

/* Both; false, with no transaction open, if the extension is gone. */
bool
WorkerPassBegin(const char *activity)
{
	WorkerPassStart(activity);
	return WorkerPassOpen();
}

void
WorkerPassEnd(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}
