/*-------------------------------------------------------------------------
 *
 * databases.h
 *	  Shared memory segment "queue databases": the registry of databases
 *	  served by background workers, and the launcher.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SHMEM_DATABASES_H
#define QUEUE_SHMEM_DATABASES_H

#include "datatype/timestamp.h"
#include "postmaster/bgworker.h"

/* What the launcher and a database worker share about one database. */
typedef struct QueueDbSlot
{
	Oid			dboid;			/* InvalidOid: free slot */
	bool		registered;		/* the extension may be installed there */
	uint32		reg_gen;		/* bumped by each registration */
	pid_t		pid;			/* its worker, or 0 */
	struct Latch *latch;		/* its worker's latch, or NULL */
	int			requests;		/* QUEUE_DB_* asked of the worker */
	TimestampTz wake_at;		/* earliest newly scheduled job, or 0 */
	TimestampTz sleep_until;	/* its worker sleeps until then; 0 awake */
	TimestampTz stopped_until;	/* no worker before this (DROP DATABASE) */
	TimestampTz next_start;		/* no restart before this (after a crash) */
} QueueDbSlot;

/* What a database's worker is asked to do. */
#define QUEUE_DB_NOTIFY			0x01	/* some queue has listeners to wake */
#define QUEUE_DB_NOTIFY_ALL		0x02	/* ... and we could not tell which */
#define QUEUE_DB_ORPHANS		0x04	/* a backend holding claims exited */
#define QUEUE_DB_SCHEDULES		0x08	/* schedules changed: look at them again */

extern Size QueueDbShmemSize(void);
extern void QueueDbShmemInit(void);
extern bool QueueDbActive(void);

extern void QueueRegisterDatabase(Oid dboid);
extern void QueueDbWake(Oid dboid, int requests, TimestampTz at);

/* the launcher */
extern void QueueLauncherSpec(BackgroundWorker *worker);
extern void QueueLauncherEnsure(void);
extern bool QueueLauncherAttach(struct Latch *latch);
extern void QueueLauncherDetach(void);
extern int	QueueDbSlotsCopy(QueueDbSlot *out);
extern void QueueDbSlotSet(Oid dboid, bool forget, pid_t pid, TimestampTz next_start);

/* a database worker */
extern bool QueueDbWorkerAttach(Oid dboid, struct Latch *latch);
extern void QueueDbWorkerDetach(Oid dboid, bool unregister, TimestampTz next_start);
extern int	QueueDbWorkerFetch(Oid dboid, TimestampTz *wake_at);
extern TimestampTz QueueDbWorkerSleep(Oid dboid, TimestampTz until);

/* DDL that needs the database to itself */
extern void QueueDbWorkerStop(Oid dboid, TimestampTz until);

#endif							/* QUEUE_SHMEM_DATABASES_H */
