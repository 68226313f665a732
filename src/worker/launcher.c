/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The launcher: the background worker that starts one worker per
 *	  database in which the extension is installed (worker/dbworker.c).
 *
 * The launcher is registered at postmaster start (shared_preload_libraries)
 * and starts only once recovery has finished, so a standby stays idle until
 * it is promoted.  It is connected to no database: it asks every database
 * once, at its start, whether the extension is there (by starting that
 * database's worker, which leaves if not), and afterwards learns of new
 * installations from CREATE EXTENSION (shmem/databases.c).
 *
 * A launcher that is terminated exits cleanly and is not restarted by the
 * postmaster; the database workers (and CREATE EXTENSION) start a new one
 * when they find none at work (QueueLauncherEnsure), and a launcher that
 * finds another already at work leaves at once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "base/settings.h"
#include "shmem/databases.h"
#include "worker/launcher.h"

#define RESTART_DELAY_MS		5000

PGDLLEXPORT void queue_launcher_main(Datum arg);

/* At server start: the launcher is started once recovery has finished. */
void
QueueWorkerRegister(void)
{
	BackgroundWorker worker;

	QueueLauncherSpec(&worker);
	RegisterBackgroundWorker(&worker);
}

static void
launcher_exit(int code, Datum arg)
{
	QueueLauncherDetach();
}

typedef struct Started
{
	Oid			dboid;
	pid_t		pid;
	BackgroundWorkerHandle *handle;
} Started;

/* Oids of the databases that accept connections. */
static List *
connectable_databases(void)
{
	List	   *result = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	MemoryContext outer = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		/* Templates are left alone: a worker there would block CREATE DATABASE. */
		if (db->datallowconn && !db->datistemplate &&
			db->datconnlimit != DATCONNLIMIT_INVALID_DB)
		{
			MemoryContext old = MemoryContextSwitchTo(outer);

			result = lappend_oid(result, db->oid);
			MemoryContextSwitchTo(old);
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return result;
}

static BackgroundWorkerHandle *
start_db_worker(Oid dboid)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "queue", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "queue_db_worker_main", BGW_MAXLEN);
	snprintf(worker.bgw_name, BGW_MAXLEN, "queue worker for database %u", dboid);
	strlcpy(worker.bgw_type, "queue worker", BGW_MAXLEN);
	worker.bgw_main_arg = ObjectIdGetDatum(dboid);
	worker.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		return NULL;
	return handle;
}

/* The workers this launcher started, until they exit. */
static List *started = NIL;
static TimestampTz last_no_slot_log = 0;

/* Forget workers that have exited; one that died without detaching starts again later. */
static void
forget_exited(QueueDbSlot *slots, int n, TimestampTz now_ts)
{
	ListCell   *lc;

	foreach(lc, started)
	{
		Started    *s = (Started *) lfirst(lc);
		pid_t		pid;

		if (GetBackgroundWorkerPid(s->handle, &pid) != BGWH_STOPPED)
			continue;
		for (int i = 0; i < n; i++)
			if (slots[i].dboid == s->dboid && slots[i].pid == s->pid)
			{
				QueueDbSlotSet(s->dboid, false, 0, now_ts + RESTART_DELAY_MS * INT64CONST(1000));
				slots[i].pid = 0;
				slots[i].next_start = now_ts + RESTART_DELAY_MS * INT64CONST(1000);
			}
		pfree(s->handle);
		started = foreach_delete_current(started, lc);
	}
}

static bool
started_for(Oid dboid)
{
	ListCell   *lc;

	foreach(lc, started)
		if (((Started *) lfirst(lc))->dboid == dboid)
			return true;
	return false;
}

/*
 * Start the worker of the database of slot, which has none; false if it
 * must be tried again soon (no free background worker slot).
 */
static bool
start_for(QueueDbSlot *slot, TimestampTz now_ts)
{
	BackgroundWorkerHandle *h = start_db_worker(slot->dboid);
	Started    *s;

	if (h == NULL)
	{
		/* No free worker slot now: say so, once a minute at most. */
		if (now_ts - last_no_slot_log >= 60 * USECS_PER_SEC)
		{
			ereport(LOG,
					(errmsg("queue launcher could not start a worker for database %u: no free background worker slot",
							slot->dboid),
					 errhint("Each database using queue needs one; raise max_worker_processes.")));
			last_no_slot_log = now_ts;
		}
		return false;
	}
	s = palloc(sizeof(Started));
	s->dboid = slot->dboid;
	s->handle = h;
	s->pid = 0;
	started = lappend(started, s);
	(void) WaitForBackgroundWorkerStartup(h, &s->pid);
	return true;
}

/*
 * Start a worker for each registered database that has none and may have
 * one now; returns whether one must be tried again soon.
 */
static bool
start_workers(QueueDbSlot *slots, int n, TimestampTz now_ts)
{
	List	   *dbs = NIL;
	bool		dbs_read = false;
	bool		retry_soon = false;

	for (int i = 0; i < n; i++)
	{
		QueueDbSlot *slot = &slots[i];

		/* a worker another launcher started may still serve it */
		if (started_for(slot->dboid) || !slot->registered || slot->pid != 0)
			continue;
		if (now_ts < slot->stopped_until || now_ts < slot->next_start)
		{
			retry_soon = true;
			continue;
		}
		if (!dbs_read)
		{
			dbs = connectable_databases();
			dbs_read = true;
		}
		if (!list_member_oid(dbs, slot->dboid))
			QueueDbSlotSet(slot->dboid, true, 0, 0);
		else if (!start_for(slot, now_ts))
			retry_soon = true;
	}
	list_free(dbs);
	return retry_soon;
}

void
queue_launcher_main(Datum arg)
{
	QueueDbSlot *slots = palloc(sizeof(QueueDbSlot) * queue_max_databases);
	List	   *dbs;
	ListCell   *lc;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGINT, SIG_IGN);	/* there is no query to cancel */
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("queue launcher");
	if (!QueueLauncherAttach(MyLatch))
		proc_exit(0);
	before_shmem_exit(launcher_exit, (Datum) 0);

	/* Ask every database once; workers leave where there is no extension. */
	dbs = connectable_databases();
	foreach(lc, dbs)
		QueueRegisterDatabase(lfirst_oid(lc));

	while (!ShutdownRequestPending)
	{
		int			n = QueueDbSlotsCopy(slots);
		TimestampTz now_ts = GetCurrentTimestamp();
		bool		retry_soon;

		forget_exited(slots, n, now_ts);
		retry_soon = start_workers(slots, n, now_ts);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 retry_soon ? 1000 : 60000, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
	}
	proc_exit(0);
}
