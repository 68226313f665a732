/*-------------------------------------------------------------------------
 *
 * listeners.c
 *	  Shared memory segment "queue listeners": which backends LISTEN on
 *	  queue channels.
 *
 * The worker's NOTIFY is wasted work when nobody listens: with single-job
 * producers and no listeners it cost almost as much CPU as the producers
 * themselves.  Each backend therefore publishes, in one slot per PGPROC,
 * the database it listens in on some "queue_..." channel (xact/listen.c
 * says when), and a committing producer asks the worker for a NOTIFY only
 * if such a backend exists in its database.
 *
 * Locking: none; each slot is an atomic written only by its backend, read
 * after a memory barrier.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/proc.h"
#include "storage/shmem.h"

#include "shmem/listeners.h"

/* One per PGPROC below MaxBackends: the database it listens in, or 0. */
static pg_atomic_uint32 *listen_db = NULL;

Size
QueueListenerShmemSize(void)
{
	return mul_size(MaxBackends, sizeof(pg_atomic_uint32));
}

/* At shared memory startup, with AddinShmemInitLock held. */
void
QueueListenerShmemInit(void)
{
	bool		found;

	listen_db = ShmemInitStruct("queue listeners", QueueListenerShmemSize(), &found);
	if (!found)
		for (int i = 0; i < MaxBackends; i++)
			pg_atomic_init_u32(&listen_db[i], InvalidOid);
}

/* This backend listens in database dboid (InvalidOid: nowhere). */
void
QueueListenerPublish(Oid dboid)
{
	if (listen_db == NULL || MyProc == NULL || MyProc->pgprocno >= MaxBackends)
		return;
	pg_atomic_write_u32(&listen_db[MyProc->pgprocno], dboid);
	pg_memory_barrier();
}

/* Does any backend of this database listen on a queue channel? */
bool
QueueAnyListener(Oid dboid)
{
	if (listen_db == NULL)
		return true;			/* cannot tell: assume so */
	pg_memory_barrier();
	for (int i = 0; i < MaxBackends; i++)
		if (pg_atomic_read_u32(&listen_db[i]) == dboid)
			return true;
	return false;
}
