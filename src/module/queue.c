/*-------------------------------------------------------------------------
 *
 * queue.c
 *	  Module entry point: the settings, the transaction callback, the
 *	  caches' callbacks, and, when the library is preloaded, shared memory
 *	  (one table of segments), the background workers and the utility hook.
 *
 * The layers of src/, lowest first (docs/design.md has the map; make lint
 * checks that calls go one way): base (types, settings, errors), shmem
 * (one file per shared memory segment), catalog (the queue cache, plans,
 * privileges), storage (rows without the executor), xact (what a
 * transaction does until it ends), ops (the SQL entry points), worker
 * (the background workers), module (this).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "base/settings.h"
#include "catalog/cache.h"
#include "catalog/spi.h"
#include "module/utility.h"
#include "shmem/databases.h"
#include "shmem/leasemap.h"
#include "shmem/listeners.h"
#include "shmem/owners.h"
#include "shmem/queuestate.h"
#include "shmem/segment.h"
#include "shmem/waits.h"
#include "storage/direct.h"
#include "worker/launcher.h"
#include "xact/xact.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Every shared memory segment, requested and set up in this order. */
static const QueueShmemSegment segments[] = {
	{"queue state", QueueStateShmemSize, QueueStateRequestLocks, QueueStateShmemInit},
	{"queue leases", LeaseMapShmemSize, LeaseMapRequestLocks, LeaseMapShmemInit},
	{"queue waits", QueueWaitShmemSize, NULL, QueueWaitShmemInit},
	{"queue databases", QueueDbShmemSize, NULL, QueueDbShmemInit},
	{"queue listeners", QueueListenerShmemSize, NULL, QueueListenerShmemInit},
	{"queue claim owners", QueueOwnersShmemSize, NULL, QueueOwnersShmemInit},
};

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
queue_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	for (int i = 0; i < (int) lengthof(segments); i++)
	{
		RequestAddinShmemSpace(segments[i].size());
		if (segments[i].request_locks != NULL)
			segments[i].request_locks();
	}
}

static void
queue_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	for (int i = 0; i < (int) lengthof(segments); i++)
		segments[i].init();
	LWLockRelease(AddinShmemInitLock);
}

void
_PG_init(void)
{
	/* What sizes shared memory can only be set when it is made. */
	bool		preloading = process_shared_preload_libraries_in_progress && !IsBinaryUpgrade;

	QueueSettingsDefine(preloading);
	QueueXactInit();
	QueueSpiInit();
	QueueCacheInit(QueueDirectRelease);
	QueueDirectInit();
	if (!preloading)
		return;

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = queue_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = queue_shmem_startup;
	QueueWorkerRegister();
	QueueUtilityHookInstall();
}
