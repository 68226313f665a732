/*-------------------------------------------------------------------------
 *
 * databases.c
 *	  Shared memory segment "queue databases": the registry of databases
 *	  served by background workers, what each worker has been asked to do,
 *	  and the launcher that starts them (worker/).
 *
 * Locking: one spinlock protects the launcher's latch and the database
 * slots; it is held only to read or write a few fields, never across a
 * latch set or a wait.  A condition variable tells DDL waiting for a
 * worker to leave (QueueDbWorkerStop) that one left.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "base/settings.h"
#include "shmem/databases.h"

/* How long DDL waits for a database's worker to leave. */
#define STOP_WAIT_MS	5000

typedef struct QueueDbShared
{
	slock_t		mutex;
	Latch	   *launcher_latch;
	TimestampTz launcher_requested; /* when a launcher was last asked for */
	ConditionVariable worker_left;	/* a worker left its slot */
	QueueDbSlot dbs[FLEXIBLE_ARRAY_MEMBER];
} QueueDbShared;

static QueueDbShared *registry = NULL;

/* In a database worker: the registrations its database had when it came. */
static uint32 attached_reg_gen = 0;

Size
QueueDbShmemSize(void)
{
	return add_size(offsetof(QueueDbShared, dbs),
					mul_size(queue_max_databases, sizeof(QueueDbSlot)));
}

/* At shared memory startup, with AddinShmemInitLock held. */
void
QueueDbShmemInit(void)
{
	bool		found;

	registry = ShmemInitStruct("queue databases", QueueDbShmemSize(), &found);
	if (!found)
	{
		memset(registry, 0, QueueDbShmemSize());
		SpinLockInit(&registry->mutex);
		ConditionVariableInit(&registry->worker_left);
	}
}

/* Whether databases can be served: the library was preloaded. */
bool
QueueDbActive(void)
{
	return registry != NULL;
}

/* Slot of a database; with create, allocated if missing.  Hold mutex. */
static QueueDbSlot *
db_slot(Oid dboid, bool create)
{
	QueueDbSlot *free_slot = NULL;

	for (int i = 0; i < queue_max_databases; i++)
	{
		if (registry->dbs[i].dboid == dboid)
			return &registry->dbs[i];
		if (free_slot == NULL && registry->dbs[i].dboid == InvalidOid)
			free_slot = &registry->dbs[i];
	}
	if (create && free_slot != NULL)
	{
		memset(free_slot, 0, sizeof(QueueDbSlot));
		free_slot->dboid = dboid;
	}
	return create ? free_slot : NULL;
}

/* CREATE EXTENSION committed in a database: have the launcher serve it. */
void
QueueRegisterDatabase(Oid dboid)
{
	QueueDbSlot *slot;
	Latch	   *latch = NULL;

	if (registry == NULL)
		return;
	SpinLockAcquire(&registry->mutex);
	slot = db_slot(dboid, true);
	if (slot != NULL)
	{
		slot->registered = true;
		slot->reg_gen++;
		slot->next_start = 0;
	}
	latch = registry->launcher_latch;
	SpinLockRelease(&registry->mutex);
	if (latch == NULL)
		QueueLauncherEnsure();
	if (slot == NULL)
		ereport(WARNING,
				(errmsg("queue cannot serve more than %d databases", queue_max_databases),
				 errhint("Raise queue.max_databases and restart the server, or call queue.tick() periodically in this database.")));
	if (latch)
		SetLatch(latch);
}

/*
 * Ask the worker serving a database for requests (QUEUE_DB_*), and to
 * look at the time at (0: no time) if that is before its own wake-up.
 */
void
QueueDbWake(Oid dboid, int requests, TimestampTz at)
{
	QueueDbSlot *slot;
	Latch	   *latch = NULL;

	if (registry == NULL)
		return;
	SpinLockAcquire(&registry->mutex);
	slot = db_slot(dboid, false);
	if (slot != NULL)
	{
		bool		news = (requests & ~slot->requests) != 0;

		slot->requests |= requests;

		/*
		 * A time after the worker's own wake-up waits for it: every claim
		 * commits a lease, and waking the worker for each cost it a few
		 * percent of a CPU in a busy drain.  An awake worker looks at
		 * wake_at before it sleeps (QueueDbWorkerSleep).
		 */
		if (at != 0 && (slot->wake_at == 0 || at < slot->wake_at))
		{
			slot->wake_at = at;
			if (slot->sleep_until != 0 && at < slot->sleep_until)
				news = true;
		}
		if (news)
			latch = slot->latch;
	}
	SpinLockRelease(&registry->mutex);
	if (latch)
		SetLatch(latch);
}

/* ---------------------------------------------------------------- launcher */

/*
 * The launcher's registration: statically at server start, and dynamically
 * when it is missing (QueueLauncherEnsure).
 */
void
QueueLauncherSpec(BackgroundWorker *worker)
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

/*
 * Start a launcher if none is at work (the last one was terminated) and
 * none was asked for in the last few seconds.
 */
void
QueueLauncherEnsure(void)
{
	TimestampTz now_ts = GetCurrentTimestamp();
	BackgroundWorker worker;
	bool		missing;

	if (registry == NULL)
		return;
	SpinLockAcquire(&registry->mutex);
	missing = registry->launcher_latch == NULL &&
		now_ts - registry->launcher_requested > 5 * USECS_PER_SEC;
	if (missing)
		registry->launcher_requested = now_ts;
	SpinLockRelease(&registry->mutex);
	if (!missing)
		return;
	QueueLauncherSpec(&worker);
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	(void) RegisterDynamicBackgroundWorker(&worker, NULL);
}

/* A launcher starts; false if another one is already at work. */
bool
QueueLauncherAttach(Latch *latch)
{
	bool		ok;

	SpinLockAcquire(&registry->mutex);
	ok = registry->launcher_latch == NULL;
	if (ok)
		registry->launcher_latch = latch;
	SpinLockRelease(&registry->mutex);
	return ok;
}

void
QueueLauncherDetach(void)
{
	SpinLockAcquire(&registry->mutex);
	registry->launcher_latch = NULL;
	registry->launcher_requested = 0;
	SpinLockRelease(&registry->mutex);
}

/* Copy of every used database slot, for the launcher. */
int
QueueDbSlotsCopy(QueueDbSlot *out)
{
	int			n = 0;

	SpinLockAcquire(&registry->mutex);
	for (int i = 0; i < queue_max_databases; i++)
		if (registry->dbs[i].dboid != InvalidOid)
			out[n++] = registry->dbs[i];
	SpinLockRelease(&registry->mutex);
	return n;
}

/* Update what the launcher decides about a database. */
void
QueueDbSlotSet(Oid dboid, bool forget, pid_t pid, TimestampTz next_start)
{
	QueueDbSlot *slot;

	SpinLockAcquire(&registry->mutex);
	slot = db_slot(dboid, false);
	if (slot != NULL)
	{
		if (forget)
			slot->dboid = InvalidOid;
		else
		{
			slot->pid = pid;
			if (pid == 0)
				slot->latch = NULL;
			slot->next_start = next_start;
		}
	}
	SpinLockRelease(&registry->mutex);
	if (forget || pid == 0)
		ConditionVariableBroadcast(&registry->worker_left);
}

/* ---------------------------------------------------------------- db worker */

/*
 * A database worker takes its slot; false if the slot is gone (the
 * database was unregistered) or another worker has it.
 */
bool
QueueDbWorkerAttach(Oid dboid, Latch *latch)
{
	QueueDbSlot *slot;
	bool		ok = false;

	SpinLockAcquire(&registry->mutex);
	slot = db_slot(dboid, false);
	if (slot != NULL && slot->latch == NULL)
	{
		slot->latch = latch;
		slot->pid = MyProcPid;
		/* claimers may have died while nobody served */
		slot->requests |= QUEUE_DB_ORPHANS;
		attached_reg_gen = slot->reg_gen;
		ok = true;
	}
	SpinLockRelease(&registry->mutex);
	return ok;
}

/*
 * The worker leaves; with unregister, the extension is gone from its
 * database.  No worker starts there before next_start (0: at once).
 */
void
QueueDbWorkerDetach(Oid dboid, bool unregister, TimestampTz next_start)
{
	QueueDbSlot *slot;
	Latch	   *latch;

	SpinLockAcquire(&registry->mutex);
	slot = db_slot(dboid, false);
	if (slot != NULL && slot->pid == MyProcPid)
	{
		slot->latch = NULL;
		slot->pid = 0;
		slot->next_start = next_start;

		/*
		 * Leave the database unserved only if nobody installed the
		 * extension since we looked (CREATE EXTENSION right after CREATE
		 * DATABASE registers it again while we are leaving).
		 */
		if (unregister && slot->reg_gen == attached_reg_gen)
			slot->dboid = InvalidOid;
	}
	latch = registry->launcher_latch;
	SpinLockRelease(&registry->mutex);
	ConditionVariableBroadcast(&registry->worker_left);
	if (latch)
		SetLatch(latch);
}

/*
 * What a database worker has been asked to do since it last looked
 * (QUEUE_DB_*), and the earliest scheduled time it was told.
 */
int
QueueDbWorkerFetch(Oid dboid, TimestampTz *wake_at)
{
	QueueDbSlot *slot;
	int			requests = 0;

	*wake_at = 0;
	SpinLockAcquire(&registry->mutex);
	slot = db_slot(dboid, false);
	if (slot != NULL)
	{
		requests = slot->requests;
		*wake_at = slot->wake_at;
		slot->requests = 0;
		slot->wake_at = 0;
		slot->sleep_until = 0;
	}
	SpinLockRelease(&registry->mutex);
	return requests;
}

/*
 * A database worker is about to sleep until until: from now on, a time
 * before that wakes it (QueueDbWake).  Returns until, or the earliest time
 * it was told since it last looked (QueueDbWorkerFetch), if that is
 * earlier.
 */
TimestampTz
QueueDbWorkerSleep(Oid dboid, TimestampTz until)
{
	QueueDbSlot *slot;

	SpinLockAcquire(&registry->mutex);
	slot = db_slot(dboid, false);
	if (slot != NULL)
	{
		if (slot->wake_at != 0 && slot->wake_at < until)
			until = slot->wake_at;
		slot->wake_at = 0;
		slot->sleep_until = until;
	}
	SpinLockRelease(&registry->mutex);
	return until;
}

/* The pid of the worker of a database, 0 if none; hold mutex. */
static pid_t
worker_pid(Oid dboid)
{
	QueueDbSlot *slot = db_slot(dboid, false);

	return slot != NULL ? slot->pid : 0;
}

/*
 * Stop the worker of a database and keep it stopped until until, so that
 * DROP DATABASE and friends do not find it connected.  Sleeps until it
 * has left, for STOP_WAIT_MS at most.
 */
void
QueueDbWorkerStop(Oid dboid, TimestampTz until)
{
	QueueDbSlot *slot;
	pid_t		pid = 0;
	TimestampTz deadline;

	if (registry == NULL)
		return;
	SpinLockAcquire(&registry->mutex);
	slot = db_slot(dboid, false);
	if (slot != NULL)
	{
		slot->stopped_until = until;
		pid = slot->pid;
	}
	SpinLockRelease(&registry->mutex);
	if (pid == 0)
		return;

	ConditionVariablePrepareToSleep(&registry->worker_left);
	kill(pid, SIGTERM);
	deadline = GetCurrentTimestamp() + STOP_WAIT_MS * INT64CONST(1000);
	for (;;)
	{
		TimestampTz now_ts;
		bool		gone;

		SpinLockAcquire(&registry->mutex);
		gone = worker_pid(dboid) != pid;
		SpinLockRelease(&registry->mutex);
		now_ts = GetCurrentTimestamp();
		if (gone || now_ts >= deadline)
			break;
		(void) ConditionVariableTimedSleep(&registry->worker_left,
										   (deadline - now_ts + 999) / 1000,
										   PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
}
