/*-------------------------------------------------------------------------
 *
 * owners.c
 *	  Shared memory segment "queue claim owners": which sessions that
 *	  claimed jobs are still alive.
 *
 * A claim records its session on the job: pid and backend start time,
 * since pids are reused.  Upkeep returns the running jobs of sessions that
 * are gone.  pg_stat_activity cannot tell it which those are: it hides
 * another role's backend_start from a queue owner without
 * pg_read_all_stats, and upkeep runs as the queue's owner, so a consumer
 * logged in as another role would look gone while it still works on its
 * jobs.  Instead, each session publishes its start time, in one shared
 * slot per PGPROC, before its first claim takes effect, and clears it when
 * it exits.  A session is alive while a process with its pid is in the
 * process array and has published its start time.
 *
 * The exit callback clears the slot before it wakes the worker, so the
 * worker's first look already finds the claims orphaned.  The exiting
 * backend may still hold row locks of its unfinished transaction, which
 * it can no longer commit; upkeep skips locked jobs and the worker looks
 * again shortly after.
 *
 * Locking: none; each slot is an atomic written only by its backend, read
 * after a memory barrier.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "shmem/owners.h"
#include "shmem/wakeups.h"

/* One per PGPROC below MaxBackends: its session's start time, or 0. */
static pg_atomic_uint64 *owner_start = NULL;

static bool published = false;
static bool committed_claims = false;

Size
QueueOwnersShmemSize(void)
{
	return mul_size(MaxBackends, sizeof(pg_atomic_uint64));
}

/* At shared memory startup, with AddinShmemInitLock held. */
void
QueueOwnersShmemInit(void)
{
	bool		found;

	owner_start = ShmemInitStruct("queue claim owners", QueueOwnersShmemSize(), &found);
	if (!found)
		for (int i = 0; i < MaxBackends; i++)
			pg_atomic_init_u64(&owner_start[i], 0);
}

static void
owner_exit(int code, Datum arg)
{
	pg_atomic_write_u64(&owner_start[MyProc->pgprocno], 0);
	pg_memory_barrier();
	if (committed_claims)
		QueueSignalClaimerExit();
}

/*
 * Before a claim records this session on jobs (claim_once in ops/claim.c,
 * through which held jobs come too): publish it, once per session.  The slot is set
 * before the claim can commit, so upkeep never sees a committed claim of
 * a session that has not published.
 */
void
QueueOwnerPublish(void)
{
	if (published || owner_start == NULL || MyProc == NULL ||
		MyProc->pgprocno >= MaxBackends)
		return;
	before_shmem_exit(owner_exit, (Datum) 0);
	pg_atomic_write_u64(&owner_start[MyProc->pgprocno], (uint64) MyStartTimestamp);
	pg_memory_barrier();
	published = true;
}

/* A transaction of this session committed claims: tell the worker at exit. */
void
QueueOwnerCommitted(void)
{
	committed_claims = true;
}

/*
 * Is the session that claimed with this pid and start time alive?  Without
 * shared memory (the library not preloaded) only the pid can be checked,
 * and a reused pid keeps a gone claimer's jobs until their lease runs out.
 */
bool
QueueOwnerAlive(int32 pid, TimestampTz start)
{
	PGPROC	   *proc = BackendPidGetProc(pid);

	if (proc == NULL)
		return false;
	if (owner_start == NULL)
		return true;
	if (proc->pgprocno >= MaxBackends)
		return false;
	pg_memory_barrier();
	return (TimestampTz) pg_atomic_read_u64(&owner_start[proc->pgprocno]) == start;
}
