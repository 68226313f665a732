/*-------------------------------------------------------------------------
 *
 * leaseload.c
 *	  Making shared memory know a queue's batch leases (xact/leases.c):
 *	  after a restart, from the queue's lease rows.
 *
 * After a restart the entries are gone: the first claim on a queue loads
 * them from its lease rows (whose owners are all gone, so the worker
 * returns them soon after).  Leases a claim took since are in them
 * already, so this happens once per queue and server start.
 *
 * Each queue's leases have a heavyweight lock (QueueLeasesLock): batch
 * claims and the worker take it shared (without waiting), what must see
 * the leases hold still (queue.purge, loading them) exclusively.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "base/errors.h"
#include "base/jobid.h"
#include "base/locktags.h"
#include "base/role.h"
#include "catalog/spi.h"
#include "shmem/leasemap.h"
#include "shmem/queuestate.h"
#include "xact/leaseload.h"

/* Take the queue's lease lock in mode (until the transaction ends); false if !wait and taken. */
bool
QueueLeasesLock(int32 qno, LOCKMODE mode, bool wait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) qno, 0, QUEUE_LOCKTAG_LEASES);
	return LockAcquire(&tag, mode, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

static void
unlock_leases(int32 qno, LOCKMODE mode)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) qno, 0, QUEUE_LOCKTAG_LEASES);
	LockRelease(&tag, mode, false);
}

/*
 * Read the jobs q's leases still hold (ready, at the attempt a lease
 * lists), by lease, as the lease table's owner: a consumer may claim
 * without reading it.  Returns how many leases there are.
 */
static int
read_lease_rows(QueueInfo *q, Oid relid)
{
	QueueAsRole as;
	int			ret;
	int			nbatches = 0;

	QueueAsRoleInScopeBegin(&as, QueueRelOwner(relid, q->name));
	ret = QueueExecuteSqlLatest(psprintf("SELECT l.lease, l.claimed_at, l.lease_until, u.id, u.attempt,"
										 " l.owner_pid, l.owner_start"
										 " FROM %s l, unnest(l.ids, l.attempts) AS u(id, attempt), %s j"
										 " WHERE j.id = u.id AND j.state = 'ready' AND j.attempt = u.attempt"
										 " ORDER BY l.lease",
										 quote_qualified_identifier("queue", get_rel_name(relid)),
										 quote_qualified_identifier("queue", psprintf("q_%s", q->name))),
								NULL, true, 0);
	QueueAsRoleEnd(&as);
	QueueCheckSpi(ret, SPI_OK_SELECT, -1, "read the leases", q->name);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		if (i == 0 || SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull) !=
			SPI_getbinval(SPI_tuptable->vals[i - 1], SPI_tuptable->tupdesc, 1, &isnull))
			nbatches++;
	}
	return nbatches;
}

/* The lease of row i of read_lease_rows, as an entry. */
static LeaseBatch
lease_of_row(uint64 i)
{
	HeapTuple	tup = SPI_tuptable->vals[i];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	LeaseBatch	b = {0};
	bool		isnull;

	b.key.id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	b.xid = InvalidTransactionId;
	b.remaining = 0;
	b.claimed_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 2, &isnull));
	b.lease_until = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &isnull));
	b.owner_pid = DatumGetInt32(SPI_getbinval(tup, desc, 6, &isnull));
	if (isnull)
		b.owner_pid = 0;
	b.owner_start = DatumGetTimestampTz(SPI_getbinval(tup, desc, 7, &isnull));
	if (isnull)
		b.owner_start = 0;
	return b;
}

/* Read q's lease rows into shared memory.  Must be called inside QueueSpiBegin. */
static void
load_leases(QueueInfo *q)
{
	Oid			relid = QueueLeaseTableRelid(q);
	uint64		nrows;
	int			nbatches;

	QueueLeasesLock(q->qno, ExclusiveLock, true);
	if (QueueLeasesLoaded(q->qno) != 0 || !OidIsValid(relid))
	{
		unlock_leases(q->qno, ExclusiveLock);
		if (!OidIsValid(relid))
			QueueLeasesSetLoaded(q->qno);
		return;
	}
	nbatches = read_lease_rows(q, relid);
	nrows = SPI_processed;
	if (!LeaseMapReserve((int) nrows, nbatches))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("queue \"%s\" has more leased jobs than shared memory can track", q->name),
				 errdetail("Its lease table holds " UINT64_FORMAT " jobs, left from before the server started.",
						   nrows),
				 errhint("Wait for the background worker to return them, or raise queue.max_leased_jobs.")));

	LWLockAcquire(LeaseMapQueueLock(q->qno), LW_EXCLUSIVE);
	for (uint64 i = 0; i < nrows; i++)
	{
		LeaseBatch	b = lease_of_row(i);
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4, &isnull));
		int32		attempt = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 5, &isnull));

		(void) LeaseMapPutBatch(&b, false);
		/* (what another queue's row or a second lease lists is not ours) */
		if (JobIdQueue(id) == q->qno && LeaseMapAddJob(id, b.key.id, attempt, NULL))
			(void) LeaseMapBatchAdd(b.key.id, 1);
		else
			LeaseMapUnreserve(1, 0);
	}
	QueueLeasesSetLoaded(q->qno);
	LWLockRelease(LeaseMapQueueLock(q->qno));
	unlock_leases(q->qno, ExclusiveLock);
}

/*
 * Whether shared memory tracks q's batch leases (loading them if need
 * be): claims must then check each row they would take.  Without shared
 * memory, or for a queue beyond queue.max_queues, nothing takes batch
 * leases.  Must be called inside QueueSpiBegin.
 */
bool
QueueLeaseTracking(QueueInfo *q)
{
	int			state;

	/* a standby takes no leases, and must not load what replay changes */
	if (!LeaseMapActive() || RecoveryInProgress())
		return false;
	state = QueueLeasesLoaded(q->qno);
	if (state < 0)
		return false;
	if (state == 0)
		load_leases(q);
	return true;
}
