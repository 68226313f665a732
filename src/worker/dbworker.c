/*-------------------------------------------------------------------------
 *
 * dbworker.c
 *	  A database worker: one per database in which the extension is
 *	  installed, started by the launcher (worker/launcher.c).
 *
 * It sleeps until the earliest of: the next scheduled job or lease expiry
 * it knows of, the next tick of a schedule, queue.worker_naptime, or its
 * latch, which committing producers set when they make work ready (to
 * send NOTIFYs, worker/notify.c), schedule an earlier job, change
 * schedules, or exit while holding claims (shmem/databases.c).  Then it
 * notifies listeners first, fires the ticks that fell due
 * (worker/schedules.c), and runs upkeep (worker/upkeep.c) if something
 * fell due.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "base/role.h"
#include "base/settings.h"
#include "shmem/databases.h"
#include "worker/notify.h"
#include "worker/pass.h"
#include "worker/schedules.h"
#include "worker/upkeep.h"

#define CLEANUP_INTERVAL_MS		10000
#define ORPHAN_RECHECK_MS		50
#define FAILED_RESTART_MS		1000

PGDLLEXPORT void queue_db_worker_main(Datum arg);

/* When the worker looks next. */
typedef struct WorkerTimes
{
	TimestampTz next_upkeep;	/* upkeep falls due, 0 at once */
	TimestampTz orphan_recheck; /* a second look for orphans, or 0 */
	TimestampTz last_cleanup;
	TimestampTz next_fire;		/* a schedule's tick falls due, 0 at once */
	TimestampTz last_fire;		/* when ticks were last looked for */
} WorkerTimes;

/*
 * SIGTERM: leave after the pass, or, while it runs code of a queue's owner
 * (base/role.c), at once (the transaction rolls back): that code must not
 * keep the server from shutting down by catching the statement timeout's
 * cancels.
 */
static void
worker_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	ShutdownRequestPending = true;
	if (QueueInOwnerCode)
	{
		ProcDiePending = true;
		InterruptPending = true;
	}
	SetLatch(MyLatch);
	errno = save_errno;
}

/*
 * On the way out: after an error, no worker for a second, so that one
 * that fails on every pass (a table of the extension changed by hand)
 * does not start again and again at once.
 */
static void
db_worker_exit(int code, Datum arg)
{
	QueueDbWorkerDetach(DatumGetObjectId(arg), false,
						code != 0 ? GetCurrentTimestamp() + FAILED_RESTART_MS * INT64CONST(1000) : 0);
}

/*
 * Take in what the worker was asked; returns whether to look for orphans
 * (on a second look too: jobs the exiting backend still had locked).
 */
static bool
take_requests(Oid dboid, WorkerTimes *t, TimestampTz now_ts)
{
	TimestampTz wake_at;
	int			requests = QueueDbWorkerFetch(dboid, &wake_at);

	if (wake_at != 0 && (t->next_upkeep == 0 || wake_at < t->next_upkeep))
		t->next_upkeep = wake_at;
	if ((requests & QUEUE_DB_SCHEDULES) != 0)
		t->next_fire = 0;
	WorkerNotifyAsked(requests, now_ts);
	if ((requests & QUEUE_DB_ORPHANS) != 0)
	{
		t->orphan_recheck = now_ts + ORPHAN_RECHECK_MS * INT64CONST(1000);
		if (t->next_upkeep == 0 || t->orphan_recheck < t->next_upkeep)
			t->next_upkeep = t->orphan_recheck;
		return true;
	}
	if (t->orphan_recheck != 0 && now_ts >= t->orphan_recheck)
	{
		t->orphan_recheck = 0;
		return true;			/* the second look sweeps every queue too */
	}
	return false;
}

/*
 * Fire the ticks that fell due; false if the extension is gone.  The
 * worker looks at every cleanup interval too, for schedules that changed
 * without telling it (in a prepared transaction).
 */
static bool
fire_if_due(WorkerTimes *t, TimestampTz now_ts)
{
	TimestampTz next;

	if (t->next_fire != 0 && now_ts < t->next_fire &&
		now_ts - t->last_fire < CLEANUP_INTERVAL_MS * INT64CONST(1000))
		return true;
	t->last_fire = now_ts;
	if (!WorkerFireSchedules(&next))
		return false;
	t->next_fire = next != 0 ? next : DT_NOEND;
	return true;
}

/* Upkeep, if it fell due; false if the extension is gone. */
static bool
upkeep_if_due(WorkerTimes *t, bool orphans, TimestampTz now_ts)
{
	bool		cleanup = now_ts - t->last_cleanup >= CLEANUP_INTERVAL_MS * INT64CONST(1000);
	TimestampTz due;

	if (t->next_upkeep != 0 && now_ts < t->next_upkeep && !orphans)
		return true;
	if (!WorkerUpkeep(orphans || cleanup, cleanup, &due))
		return false;
	if (cleanup)
		t->last_cleanup = now_ts;
	now_ts = GetCurrentTimestamp();
	t->next_upkeep = now_ts + queue_worker_naptime * INT64CONST(1000);
	if (due != 0 && due < t->next_upkeep)
		t->next_upkeep = Max(due, now_ts);
	if (t->orphan_recheck != 0)
		t->next_upkeep = Min(t->next_upkeep, t->orphan_recheck);
	return true;
}

/* Sleep until something is due, or the latch is set. */
static void
sleep_until_due(Oid dboid, WorkerTimes *t)
{
	TimestampTz now_ts = GetCurrentTimestamp();
	TimestampTz until = Min(t->next_upkeep, t->next_fire);
	TimestampTz woken = QueueDbWorkerSleep(dboid, until);
	long		timeout;

	/* earlier than we knew: a producer scheduled a job for then */
	if (woken < until)
		t->next_upkeep = woken;
	timeout = woken > now_ts ? (long) ((woken - now_ts + 999) / 1000) : 0;
	timeout = WorkerNotifyTimeout(timeout, now_ts);
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					 timeout, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	if (ConfigReloadPending)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
		WorkerNotifyReloaded();
	}
}

/*
 * SIGINT, which lock_timeout sends us when a wait for a lock has lasted
 * queue.upkeep_lock_timeout, and the statement timeout when a queue's
 * upkeep has lasted queue.upkeep_timeout (worker/upkeep.c): end the wait,
 * or the upkeep, with its error.  Any other SIGINT (pg_cancel_backend) is
 * ignored: a pass is short, and it is not cancelled.
 */
static void
upkeep_timeout_handler(SIGNAL_ARGS)
{
	int			save_errno = errno;

	if (get_timeout_indicator(LOCK_TIMEOUT, false) || get_timeout_indicator(STATEMENT_TIMEOUT, false))
	{
		InterruptPending = true;
		QueryCancelPending = true;
	}
	SetLatch(MyLatch);
	errno = save_errno;
}

void
queue_db_worker_main(Datum arg)
{
	Oid			dboid = DatumGetObjectId(arg);
	WorkerTimes times = {0};
	MemoryContext pass_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, worker_sigterm);
	pqsignal(SIGINT, upkeep_timeout_handler);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	/*
	 * As the setting, not only the report: undoing what an owner's trigger
	 * set restores the setting, and would report an empty name.
	 */
	SetConfigOption("application_name", "queue worker", PGC_SUSET, PGC_S_OVERRIDE);
	if (!QueueDbWorkerAttach(dboid, MyLatch))
		proc_exit(0);
	before_shmem_exit(db_worker_exit, ObjectIdGetDatum(dboid));
	WorkerPassInit();

	/*
	 * Notifications and promotions are cheap to redo after a crash (at the
	 * session's level, which a firing pass raises for its transaction).
	 */
	SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION);
	/* Our own statements see no objects of the database's roles. */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

	pass_cxt = AllocSetContextCreate(TopMemoryContext, "queue worker pass",
									 ALLOCSET_DEFAULT_SIZES);
	while (!ShutdownRequestPending)
	{
		TimestampTz now_ts = GetCurrentTimestamp();
		bool		orphans = take_requests(dboid, &times, now_ts);
		MemoryContext old = MemoryContextSwitchTo(pass_cxt);
		bool		ok;

		/*
		 * Listeners first: a consumer is waiting on every notification, while
		 * upkeep is never more than a naptime late anyway.  Jobs that upkeep
		 * makes ready set this latch again when its transaction commits.
		 */
		ok = WorkerNotify(now_ts) && fire_if_due(&times, now_ts) &&
			upkeep_if_due(&times, orphans, now_ts);
		MemoryContextSwitchTo(old);
		MemoryContextReset(pass_cxt);
		if (!ok)
			break;
		QueueLauncherEnsure();
		sleep_until_due(dboid, &times);
	}

	/* Here only on shutdown, or because the extension was dropped. */
	QueueDbWorkerDetach(dboid, !ShutdownRequestPending, 0);
	proc_exit(0);
}
