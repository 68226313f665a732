/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The background workers: a launcher, and one worker per database in
 *	  which the extension is installed.
 *
 * The launcher is registered at postmaster start (shared_preload_libraries)
 * and starts only once recovery has finished, so a standby stays idle until
 * it is promoted.  It is connected to no database: it asks every database
 * once, at its start, whether the extension is there (by starting that
 * database's worker, which leaves if not), and afterwards learns of new
 * installations from CREATE EXTENSION (wake.c).
 *
 * A launcher that is terminated exits cleanly and is not restarted by the
 * postmaster; the database workers (and CREATE EXTENSION) start a new one
 * when they find none at work, and a launcher that finds another already
 * at work leaves at once.
 *
 * A database worker sleeps until the earliest of: the next scheduled job
 * or lease expiry it knows of, queue.worker_naptime, or its latch, which
 * committing producers set when they make work ready (to send NOTIFYs),
 * schedule an earlier job, or exit while holding claims.  Each queue's
 * upkeep runs as the owner of the queue's table, never as superuser, in a
 * subtransaction of its own so that one broken queue cannot stall others.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "commands/async.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "queue.h"

#define CLEANUP_INTERVAL_MS		10000
#define ORPHAN_RECHECK_MS		50
#define RESTART_DELAY_MS		5000
#define HOLD_MS					10000

/*
 * NOTIFY passes.  Each costs the worker a transaction and signals every
 * listening backend of the database, which wakes and hands the
 * notification to its client.  Up to NOTIFY_BURST passes go out at once,
 * so that commits a moment apart each reach a waiting consumer without
 * delay (a fixed spacing made a third of the jobs of a random stream of
 * 200 a second wait for it); past that, one pass per NOTIFY_INTERVAL_MS
 * covers every commit in between.  A queue whose consumers are all busy is
 * notified at most once per queue.notify_busy_interval
 * (QueueTakeNotifications).
 */
#define NOTIFY_INTERVAL_MS		2
#define NOTIFY_BURST			8

/*
 * A due time of a queue that claims are waiting on is theirs for this many
 * ms: they wake for it and promote the job in the transaction that takes
 * it.  A pass of ours at the same moment would only compete with them for
 * the CPU and the WAL flush, making the job later; so we do not even wake
 * for it, only to look whether they did (with jobs falling due every few
 * ms, waking for each cost more CPU than the claims that took them).
 */
#define WAITERS_GRACE_MS		10

PGDLLEXPORT void queue_launcher_main(Datum arg);
PGDLLEXPORT void queue_db_worker_main(Datum arg);

static ProcessUtility_hook_type prev_process_utility = NULL;

static void
launcher_worker(BackgroundWorker *worker)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = 1;
	strlcpy(worker->bgw_library_name, "queue", BGW_MAXLEN);
	strlcpy(worker->bgw_function_name, "queue_launcher_main", BGW_MAXLEN);
	strlcpy(worker->bgw_name, "queue launcher", BGW_MAXLEN);
	strlcpy(worker->bgw_type, "queue launcher", BGW_MAXLEN);
}

void
QueueWorkerRegister(void)
{
	BackgroundWorker worker;

	launcher_worker(&worker);
	RegisterBackgroundWorker(&worker);
}

/* Start a launcher if none is at work (the last one was terminated). */
void
QueueLauncherEnsure(void)
{
	BackgroundWorker worker;

	if (!QueueLauncherMissing())
		return;
	launcher_worker(&worker);
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	(void) RegisterDynamicBackgroundWorker(&worker, NULL);
}

static void
launcher_exit(int code, Datum arg)
{
	QueueLauncherDetach();
}

/* ---------------------------------------------------------------- launcher */

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

void
queue_launcher_main(Datum arg)
{
	List	   *started = NIL;
	QueueDbSlot *slots = palloc(sizeof(QueueDbSlot) * queue_max_databases);
	TimestampTz last_no_slot_log = 0;

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
	{
		List	   *dbs = connectable_databases();
		ListCell   *lc;

		foreach(lc, dbs)
			QueueRegisterDatabase(lfirst_oid(lc));
	}

	while (!ShutdownRequestPending)
	{
		int			n = QueueDbSlotsCopy(slots);
		TimestampTz now_ts = GetCurrentTimestamp();
		List	   *dbs = NIL;
		bool		dbs_read = false;
		bool		retry_soon = false;
		ListCell   *lc;

		/* Forget workers that have exited, and why. */
		foreach(lc, started)
		{
			Started    *s = (Started *) lfirst(lc);
			pid_t		pid;

			if (GetBackgroundWorkerPid(s->handle, &pid) == BGWH_STOPPED)
			{
				for (int i = 0; i < n; i++)
					if (slots[i].dboid == s->dboid && slots[i].pid == s->pid)
					{
						/* It died without detaching: start it again later. */
						QueueDbSlotSet(s->dboid, false, 0, now_ts + RESTART_DELAY_MS * INT64CONST(1000));
						slots[i].pid = 0;
						slots[i].next_start = now_ts + RESTART_DELAY_MS * INT64CONST(1000);
					}
				pfree(s->handle);
				started = foreach_delete_current(started, lc);
			}
		}

		for (int i = 0; i < n; i++)
		{
			QueueDbSlot *slot = &slots[i];
			bool		running = false;
			BackgroundWorkerHandle *h;

			foreach(lc, started)
				if (((Started *) lfirst(lc))->dboid == slot->dboid)
					running = true;
			/* a worker another launcher started may still serve it */
			if (running || !slot->registered || slot->pid != 0)
				continue;
			if (now_ts < slot->hold_until || now_ts < slot->next_start)
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
			{
				QueueDbSlotSet(slot->dboid, true, 0, 0);
				continue;
			}
			h = start_db_worker(slot->dboid);
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
				retry_soon = true;
				continue;
			}
			else
			{
				Started    *s = palloc(sizeof(Started));

				s->dboid = slot->dboid;
				s->handle = h;
				s->pid = 0;
				started = lappend(started, s);
				(void) WaitForBackgroundWorkerStartup(h, &s->pid);
			}
		}
		list_free(dbs);

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

/* ---------------------------------------------------------------- db worker */

/*
 * A pass is a transaction; begin_pass also holds the extension against
 * DROP EXTENSION and returns false, with no transaction open, if it is gone.
 */
static void
start_pass(const char *activity)
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
static bool
open_pass(void)
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

static bool
begin_pass(const char *activity)
{
	start_pass(activity);
	return open_pass();
}

static void
end_pass(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Channel of each queue, by queue number.  A queue keeps its name and number
 * for life, so entries never go stale; a dropped queue's entry is harmless.
 */
typedef struct Channel
{
	int32		qno;
	char		name[NAMEDATALEN];
} Channel;

static HTAB *channels = NULL;
static bool channels_stale = true;

/*
 * What the worker keeps of queue_config between passes (the channels, the
 * queues) is learnt again when its relcache entry is invalidated, as
 * queue.create, alter and drop do and DROP EXTENSION does.
 */
static Oid	config_relid = InvalidOid;	/* queue_config, when learnt */
static uint64 queues_changes = 1;	/* invalidations that may change the queues */

static void
config_relcache_callback(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == config_relid)
	{
		channels_stale = true;
		queues_changes++;
	}
}

/* Where queue_config is now; in a pass. */
static void
learn_config_relid(void)
{
	config_relid = get_relname_relid("queue_config", get_namespace_oid("queue", false));
}

/* Are the channels of all of qnos known? */
static bool
channels_known(List *qnos)
{
	ListCell   *lc;

	foreach(lc, qnos)
		if (hash_search(channels, &lfirst_int(lc), HASH_FIND, NULL) == NULL)
			return false;
	return true;
}

/* Learn the channel of every queue; in a pass. */
static void
learn_channels(void)
{
	HASH_SEQ_STATUS status;
	Channel    *old;

	hash_seq_init(&status, channels);
	while ((old = hash_seq_search(&status)) != NULL)
		hash_search(channels, &old->qno, HASH_REMOVE, NULL);
	channels_stale = false;
	learn_config_relid();
	SPI_execute("SELECT qno, 'queue_' || name FROM queue.queue_config", true, 0);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int32		qno = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		Channel    *c = hash_search(channels, &qno, HASH_ENTER, NULL);

		strlcpy(c->name, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2), NAMEDATALEN);
	}
}

/*
 * NOTIFY the listeners of every queue marked in shared memory (or of all
 * queues).  With the channels known this is a bare transaction that queues
 * the notifications: no snapshot, no catalog access, no SPI.
 */
static bool
send_notifications(bool all, TimestampTz now_ts, bool *sent, TimestampTz *retry_at)
{
	List	   *qnos = QueueTakeNotifications(MyDatabaseId, now_ts,
											   queue_notify_busy_interval * INT64CONST(1000), retry_at);

	*sent = qnos != NIL || all;
	if (!*sent)
		return true;
	if (channels == NULL)
	{
		HASHCTL		info;

		info.keysize = sizeof(int32);
		info.entrysize = sizeof(Channel);
		channels = hash_create("queue channels", 64, &info, HASH_ELEM | HASH_BLOBS);
	}
	/* (starting the transaction runs the relcache callback if need be) */
	start_pass("queue: notify");
	if (all || channels_stale || !channels_known(qnos))
	{
		if (!open_pass())
			return false;
		learn_channels();
		SPI_finish();
		PopActiveSnapshot();
	}
	if (all)
	{
		HASH_SEQ_STATUS status;
		Channel    *c;

		hash_seq_init(&status, channels);
		while ((c = hash_seq_search(&status)) != NULL)
			Async_Notify(c->name, NULL);
	}
	else
	{
		ListCell   *lc;

		foreach(lc, qnos)
		{
			Channel    *c = hash_search(channels, &lfirst_int(lc), HASH_FIND, NULL);

			/* unknown: a queue created and dropped since it was marked */
			if (c != NULL)
				Async_Notify(c->name, NULL);
		}
	}
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	return true;
}

/*
 * Cleanup visits a queue that is not due only if its archive ring has a
 * segment to empty or to turn to.  Asked in the queue's own subtransaction,
 * with its row locked (so not for a queue dropped meanwhile), so that an
 * archive broken by its owner fails that queue alone; one whose state is
 * unknown is visited, and its tick warns.
 */
static bool
archive_has_work(int32 qno)
{
	Oid			argtypes[1] = {INT4OID};
	Datum		args[1] = {Int32GetDatum(qno)};
	bool		isnull;

	if (SPI_execute_with_args("SELECT coalesce((SELECT d.turn OR cardinality(d.expired) > 0"
							  " FROM queue._archive_due(c, now()) d), true)"
							  " FROM queue.queue_config c WHERE c.qno = $1",
							  1, argtypes, args, NULL, false, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		return false;
	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Run upkeep statement sql (with the queue's number as $1 and cleanup as
 * $2) for queue qno, as owner, in a subtransaction of its own: one broken
 * queue must not stall the others.  The row lock keeps queue.drop (which
 * locks the row FOR UPDATE) out until we are done; a queue dropped since
 * we listed it is skipped.  It is taken as ourselves: a queue's owner may
 * read queue_config but not lock its rows.  Unless due, the statement runs
 * only if the queue's archive has work (looked at after the row lock, in
 * the subtransaction: an owner could otherwise break every pass by
 * dropping an archive segment).  Returns the statement's first column if
 * it is a timestamptz, read before the subtransaction frees it, or 0 (also
 * if it was NULL); *status says whether it ran.
 */
typedef enum UpkeepStatus
{
	UPKEEP_RAN,
	UPKEEP_SKIPPED,				/* dropped, or nothing to do */
	UPKEEP_FAILED				/* warned; tried again after a naptime */
} UpkeepStatus;

static TimestampTz
upkeep_queue(int32 qno, Oid owner, bool cleanup, bool due, const char *sql, UpkeepStatus *status)
{
	MemoryContext outer = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	Oid			save_userid;
	int			save_sec;
	volatile TimestampTz result = 0;

	*status = UPKEEP_SKIPPED;
	GetUserIdAndSecContext(&save_userid, &save_sec);
	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		Datum		args[2];
		Oid			argtypes[2] = {INT4OID, BOOLOID};
		bool		isnull;

		args[0] = Int32GetDatum(qno);
		args[1] = BoolGetDatum(cleanup);
		if (SPI_execute_with_args("SELECT FROM queue.queue_config c WHERE c.qno = $1 FOR KEY SHARE",
								  1, argtypes, args, NULL, false, 1) == SPI_OK_SELECT &&
			SPI_processed == 1 &&
			(due || archive_has_work(qno)))
		{
			QueueAsRole as;

			QueueAsRoleBegin(&as, owner);
			if (SPI_execute_with_args(sql, 2, argtypes, args, NULL, false, 1) == SPI_OK_SELECT &&
				SPI_processed == 1)
			{
				Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

				if (!isnull && SPI_gettypeid(SPI_tuptable->tupdesc, 1) == TIMESTAMPTZOID)
					result = DatumGetTimestampTz(d);
				*status = UPKEEP_RAN;
			}
			QueueAsRoleEnd(&as);
		}
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(outer);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		SetUserIdAndSecContext(save_userid, save_sec);
		MemoryContextSwitchTo(outer);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(outer);
		CurrentResourceOwner = oldowner;
		ereport(WARNING,
				(errmsg("queue worker could not maintain queue number %d: %s", qno, edata->message),
				 errhint("The worker tries again on its next pass.")));
		FreeErrorData(edata);
		*status = UPKEEP_FAILED;
	}
	PG_END_TRY();
	return result;
}

/* *next becomes t if t is a time (not 0, not infinity) before it. */
static void
note_next(TimestampTz *next, TimestampTz t)
{
	if (t != 0 && t != DT_NOEND && (*next == 0 || t < *next))
		*next = t;
}

/*
 * The database's queues and the owners of their tables, as of the last
 * pass that read them.  Reading them joins queue_config with pg_class by
 * name, a scan of pg_class: with 200 queues each due once a second, that
 * was a third of the worker's CPU.  The list is read again after an
 * invalidation of pg_class (a table made, dropped or given to another
 * owner) or of queue_config (config_relcache_callback), both taken in when
 * a pass starts its transaction, and at every cleanup pass, for rows of
 * queue_config written without either (a data-only restore).
 */
static int	nknown = 0;
static int32 *known_qnos = NULL;
static Oid *known_owners = NULL;
static uint64 queues_read = 0;	/* queues_changes when the list was read */

static void
queues_syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	queues_changes++;
}

/* Read the queues again if a change may have made the list stale, or always. */
static void
read_queues(bool always)
{
	/* counted first: a change committed while we read is read next time */
	uint64		changes = queues_changes;
	int			ret;

	if (queues_read == changes && !always)
		return;
	ret = SPI_execute("SELECT c.qno, cl.relowner FROM queue.queue_config c"
					  " JOIN pg_catalog.pg_class cl ON cl.relname = 'q_' || c.name"
					  " AND cl.relnamespace = 'queue'::pg_catalog.regnamespace ORDER BY c.qno",
					  true, 0);
	if (ret != SPI_OK_SELECT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("queue worker could not list the queues"),
				 errdetail("The statement returned %s.", SPI_result_code_string(ret)),
				 errhint("A rule on queue.queue_config rewrote the statement; drop it.")));
	if (known_qnos != NULL)
	{
		pfree(known_qnos);
		pfree(known_owners);
	}
	nknown = SPI_processed;
	known_qnos = MemoryContextAlloc(TopMemoryContext, sizeof(int32) * Max(nknown, 1));
	known_owners = MemoryContextAlloc(TopMemoryContext, sizeof(Oid) * Max(nknown, 1));
	for (int i = 0; i < nknown; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		known_qnos[i] = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		known_owners[i] = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
	}
	learn_config_relid();
	queues_read = changes;
}

/*
 * Upkeep of the queues that need it: expired leases and orphans, due
 * scheduled jobs, and (with cleanup) archived jobs past retention.  Each
 * queue's next due time is kept in shared memory, so a pass only visits
 * queues whose time has come; with orphans (checked at every cleanup
 * too, in case an earlier look failed) also those that may have running
 * jobs, and with cleanup those whose archive ring has a segment to empty
 * or to turn to.  A queue with running jobs always has a due time
 * (the earliest lease), so one known to have none (DT_NOEND) has no
 * running job to orphan.  A pass costs about a millisecond per queue it
 * visits, which with hundreds of idle queues made every sweep visiting
 * all of them the bulk of an idle worker's CPU and delayed the return of
 * orphans.  Batch leases (queue._end_leases) end after all the rest, for
 * every queue visited: a pass is one transaction, and the rows they lock
 * must not be held while the rest waits for something.  Sets *next to the
 * earliest time something falls due again (0 if nothing is known).
 */
static bool
run_upkeep(bool orphans, bool cleanup, TimestampTz *next)
{
	TimestampTz now_ts = GetCurrentTimestamp();

	MemoryContext outer = CurrentMemoryContext;
	bool	   *visited;

	*next = 0;
	if (!begin_pass("queue: upkeep"))
		return false;

	read_queues(cleanup);
	visited = MemoryContextAllocZero(outer, sizeof(bool) * Max(nknown, 1));

	for (int i = 0; i < nknown; i++)
	{
		TimestampTz due = 0;
		uint64		due_gen;
		bool		due_now;
		TimestampTz queue_next;
		UpkeepStatus status;

		/* gen is read before the tick takes its snapshot */
		due_now = !QueueDueGet(known_qnos[i], &due, &due_gen) || due <= now_ts ||
			(orphans && due != DT_NOEND);
		if (!orphans && due != 0 && due != DT_NOEND &&
			due > now_ts - WAITERS_GRACE_MS * INT64CONST(1000) &&
			QueueWaitersPresent(known_qnos[i], now_ts - WAITERS_GRACE_MS * INT64CONST(1000)))
		{
			due += WAITERS_GRACE_MS * INT64CONST(1000);
			due_now = false;
		}
		if (!due_now && !cleanup)
		{
			note_next(next, due);
			continue;
		}

		queue_next = upkeep_queue(known_qnos[i], known_owners[i], cleanup, due_now,
								  "SELECT t.next_due FROM queue.queue_config c,"
								  " LATERAL queue._tick_queue(c, cleanup => $2) t"
								  " WHERE c.qno = $1",
								  &status);
		if (status == UPKEEP_FAILED)
			continue;			/* its due time is past: not before the naptime */
		if (status == UPKEEP_SKIPPED)
		{
			note_next(next, due);
			continue;
		}
		visited[i] = true;
		if (queue_next == 0)
			queue_next = DT_NOEND;

		/*
		 * Claims waiting on the queue sleep until its due time, or to their
		 * deadline while it is past: a new one is theirs to wake for (see
		 * queue_claim).
		 */
		if (QueueDueSet(known_qnos[i], queue_next, due_gen, false))
			QueueSignalDue(known_qnos[i]);
		note_next(next, queue_next);
	}

	for (int i = 0; i < nknown; i++)
	{
		UpkeepStatus status;

		if (visited[i])
			(void) upkeep_queue(known_qnos[i], known_owners[i], cleanup, true,
								"SELECT queue._end_leases(c) FROM queue.queue_config c WHERE c.qno = $1",
								&status);
	}
	end_pass();
	pfree(visited);
	return true;
}

static void
db_worker_exit(int code, Datum arg)
{
	QueueDbWorkerDetach(DatumGetObjectId(arg), false);
}

void
queue_db_worker_main(Datum arg)
{
	Oid			dboid = DatumGetObjectId(arg);
	TimestampTz last_cleanup = 0;
	TimestampTz next_upkeep = 0;
	TimestampTz orphan_recheck = 0;
	double		notify_tokens = NOTIFY_BURST;
	TimestampTz tokens_at = 0;
	TimestampTz notify_retry_at = 0;
	bool		notify_owed = false;
	bool		notify_all_owed = false;
	MemoryContext pass_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGINT, SIG_IGN);	/* a pass is short; it is not cancelled */
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("queue worker");
	if (!QueueDbWorkerAttach(dboid, MyLatch))
		proc_exit(0);
	before_shmem_exit(db_worker_exit, ObjectIdGetDatum(dboid));
	CacheRegisterSyscacheCallback(RELOID, queues_syscache_callback, (Datum) 0);
	CacheRegisterRelcacheCallback(config_relcache_callback, (Datum) 0);

	/* Notifications and promotions are cheap to redo after a crash. */
	SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);
	/* Our own statements see no objects of the database's roles. */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

	pass_cxt = AllocSetContextCreate(TopMemoryContext, "queue worker pass",
									 ALLOCSET_DEFAULT_SIZES);
	while (!ShutdownRequestPending)
	{
		bool		notify;
		bool		notify_all;
		bool		orphans;
		TimestampTz wake_at;
		TimestampTz now_ts = GetCurrentTimestamp();
		long		timeout;
		MemoryContext old;

		QueueDbWorkerTake(dboid, &notify, &notify_all, &orphans, &wake_at);
		if (wake_at != 0 && (next_upkeep == 0 || wake_at < next_upkeep))
			next_upkeep = wake_at;
		if (orphans)
		{
			/* Jobs the exiting backend still had locked: look again shortly. */
			orphan_recheck = now_ts + ORPHAN_RECHECK_MS * INT64CONST(1000);
			if (next_upkeep == 0 || orphan_recheck < next_upkeep)
				next_upkeep = orphan_recheck;
		}
		else if (orphan_recheck != 0 && now_ts >= orphan_recheck)
		{
			orphans = true;		/* the second look sweeps every queue too */
			orphan_recheck = 0;
		}

		old = MemoryContextSwitchTo(pass_cxt);

		/*
		 * Listeners first: a consumer is waiting on every notification, while
		 * upkeep is never more than a naptime late anyway.  Jobs that upkeep
		 * makes ready set this latch again when its transaction commits.
		 */
		notify_owed |= notify;
		notify_all_owed |= notify_all;
		if (notify_retry_at != 0 && now_ts >= notify_retry_at)
		{
			notify_owed = true;
			notify_retry_at = 0;
		}
		notify_tokens = Min(NOTIFY_BURST, notify_tokens + (double) (now_ts - tokens_at) /
							(NOTIFY_INTERVAL_MS * 1000.0));
		tokens_at = now_ts;
		if ((notify_owed || notify_all_owed) && notify_tokens >= 1)
		{
			bool		sent;
			TimestampTz retry_at;

			if (!send_notifications(notify_all_owed, now_ts, &sent, &retry_at))
				break;
			if (sent)
				notify_tokens -= 1;
			/* the take saw every mark of the database: when the first held back is due */
			notify_retry_at = retry_at;
			notify_owed = notify_all_owed = false;
		}
		if (next_upkeep == 0 || now_ts >= next_upkeep || orphans)
		{
			bool		cleanup = now_ts - last_cleanup >= CLEANUP_INTERVAL_MS * INT64CONST(1000);
			TimestampTz due;

			if (!run_upkeep(orphans || cleanup, cleanup, &due))
				break;
			if (cleanup)
				last_cleanup = now_ts;
			now_ts = GetCurrentTimestamp();
			next_upkeep = now_ts + queue_worker_naptime * INT64CONST(1000);
			if (due != 0 && due < next_upkeep)
				next_upkeep = Max(due, now_ts);
			if (orphan_recheck != 0)
				next_upkeep = Min(next_upkeep, orphan_recheck);
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(pass_cxt);
		QueueLauncherEnsure();

		now_ts = GetCurrentTimestamp();
		next_upkeep = QueueDbWorkerSleep(dboid, next_upkeep);
		timeout = next_upkeep > now_ts ? (long) ((next_upkeep - now_ts + 999) / 1000) : 0;
		if (notify_owed || notify_all_owed)
			timeout = Min(timeout, Max(0, (long) ((1 - notify_tokens) * NOTIFY_INTERVAL_MS) + 1));
		if (notify_retry_at != 0)
			timeout = Min(timeout, Max(0, (long) ((notify_retry_at - now_ts + 999) / 1000)));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			/* marks held back may be due under a new notify_busy_interval */
			notify_owed = true;
		}
	}

	/* Here only on shutdown, or because the extension was dropped. */
	QueueDbWorkerDetach(dboid, !ShutdownRequestPending);
	proc_exit(0);
}

/* ---------------------------------------------------------------- hooks */

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
			QueueDbWorkerHold(db, GetCurrentTimestamp() + HOLD_MS * INT64CONST(1000));
	}

	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
							 queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);

	/* A dropped database's batch leases go with it. */
	if (IsA(parsetree, DropdbStmt) && OidIsValid(db))
		QueueLeaseForget(db, 0);

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
