/*-------------------------------------------------------------------------
 *
 * xact.c
 *	  The one transaction and subtransaction callback of the extension: it
 *	  calls each module's step at the end of a (sub)transaction, in the
 *	  order written here, as CommitTransaction calls PostgreSQL's own.
 *
 * Before commit (XACT_EVENT_PRE_COMMIT):
 *	 1. xact/held.c writes the jobs still held back as running rows (which
 *		records counts and lease times in xact/pending.c);
 *	 2. xact/syncclaims.c, last, after every write: a transaction of
 *		nothing but claims may commit without waiting for its flush.
 *
 * Before PREPARE, each refuses what COMMIT PREPARED could not finish:
 * xact/leases.c, xact/held.c, xact/pending.c.
 *
 * At commit or abort (and after PREPARE):
 *	 1. xact/listen.c publishes whether this backend listens;
 *	 2. xact/leases.c adds or removes the transaction's lease entries:
 *		before the cursor comes back, so that a job whose lease ended is
 *		never passed over as leased once claims look at it again;
 *	 3. xact/held.c forgets its list (its memory goes with the
 *		transaction);
 *	 4. a CREATE EXTENSION that committed has the worker serve the
 *		database (shmem/databases.c);
 *	 5. xact/pending.c lowers the claim cursor, applies counts and wakes
 *		claims, listeners and the worker;
 *	 6. a claim(wait =>) that failed stops counting as a waiter and hands
 *		on a wakeup it may have had (shmem/waits.c): after 5, or the claim
 *		woken would start past what we had locked;
 *	 7. the queue cache frees entries that went stale (catalog/cache.c),
 *		and SPI scopes an error left open are closed (catalog/spi.c);
 *	 8. xact/syncclaims.c forgets this transaction's claims.
 *
 * At the end of a subtransaction, in the same order: xact/listen.c,
 * xact/leases.c, xact/held.c and xact/pending.c hand what it did to its
 * parent, or undo it; an aborted one also ends a failed claim's wait (as
 * 6 above), and forgets the SPI scopes it left open (catalog/spi.c), whose
 * user and settings its abort gave back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"

#include "catalog/cache.h"
#include "catalog/spi.h"
#include "shmem/databases.h"
#include "shmem/waits.h"
#include "xact/held.h"
#include "xact/leases.h"
#include "xact/listen.h"
#include "xact/pending.h"
#include "xact/syncclaims.h"
#include "xact/xact.h"

/* A database whose worker is to be started at commit (CREATE EXTENSION). */
static Oid	register_db = InvalidOid;

/* Have the background worker serve database dboid once this transaction commits. */
void
QueueXactRegisterDatabase(Oid dboid)
{
	register_db = dboid;
}

/* The transaction ended: committed, or not (aborted, or prepared). */
static void
at_end(bool commit)
{
	ListenAtEnd(commit);
	LeasesAtEnd(commit);
	HeldAtEnd();
	if (commit && OidIsValid(register_db))
		QueueRegisterDatabase(register_db);
	register_db = InvalidOid;
	if (commit)
		PendingAtCommit();
	else
		PendingAtAbort();
	QueueWaitAtEnd(0);
	QueueCacheAtEOXact();
	QueueSpiAtEOXact();
	SyncClaimsAtEnd();
}

static void
queue_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			HeldAtPreCommit();
			SyncClaimsAtPreCommit();
			break;
		case XACT_EVENT_PRE_PREPARE:
			LeasesAtPrepare();
			HeldAtPrepare();
			PendingAtPrepare();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			at_end(true);
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			at_end(false);
			break;
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			break;
	}
}

static void
queue_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			nest = GetCurrentTransactionNestLevel();
	bool		commit = event == SUBXACT_EVENT_COMMIT_SUB;

	if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB)
		return;
	ListenAtSubEnd(nest, commit);
	LeasesAtSubEnd(nest, commit);
	HeldAtSubEnd(nest, commit);
	if (commit)
		PendingAtSubCommit(nest);
	else
	{
		PendingAtSubAbort(nest);
		QueueWaitAtEnd(nest);
		QueueSpiAtSubAbort(nest);
	}
}

void
QueueXactInit(void)
{
	RegisterXactCallback(queue_xact_callback, NULL);
	RegisterSubXactCallback(queue_subxact_callback, NULL);
}
