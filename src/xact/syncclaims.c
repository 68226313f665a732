/*-------------------------------------------------------------------------
 *
 * syncclaims.c
 *	  queue.synchronous_claims: commits of claims that need not wait for
 *	  their WAL to reach disk.
 *
 * A transaction whose only writes were claims of jobs in place (leased in
 * their rows, or under a batch lease) loses little if the server crashes
 * before its commit record is flushed: the claim is then undone, and its
 * jobs are ready again.  The crash ends the consumer's session anyway, and
 * the worker would return the jobs of a claim that survived it.  With
 * queue.synchronous_claims off, such a transaction commits asynchronously,
 * as with synchronous_commit = off, which saves a consumer one WAL flush
 * (and, with synchronous replication, one round trip) per claim.  A
 * consumer's complete() still waits for its flush, and that flush covers
 * the claim before it.
 *
 * It is on by default because an undone claim is not counted: a job that
 * crashes the server itself would never reach max_attempts, and its
 * history would not show the attempt.
 *
 * Any other WAL written in the transaction, before (if written under its
 * transaction id), between or after its claims, makes the commit wait as
 * configured.  So does a claim that
 * holds its jobs in memory until commit (xact/held.c): what it deleted may
 * be all that a complete() in the same transaction writes.
 *
 * Its pre-commit step must run after every other step that writes
 * (xact/xact.c says the order).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "utils/guc.h"

#include "base/settings.h"
#include "xact/syncclaims.h"

/* Where the WAL of this transaction's latest claim ended, or invalid. */
static XLogRecPtr claim_wal_end = InvalidXLogRecPtr;

/* Something other than a claim in place wrote WAL in this transaction. */
static bool other_writes = false;

/*
 * A claim starts: was anything but claims written before it?  Before the
 * first claim, only what took a transaction id counts: reading catalogs
 * may prune their pages, which writes WAL that is not the transaction's
 * (a new session's first claim waited for its flush for that alone).
 */
void
QueueSyncClaimStart(void)
{
	bool		first = XLogRecPtrIsInvalid(claim_wal_end);

	if (first ? TransactionIdIsValid(GetTopTransactionIdIfAny())
		: XactLastRecEnd != claim_wal_end)
		other_writes = true;
}

/* A claim ends; held, if it held jobs rather than leasing them in place. */
void
QueueSyncClaimEnd(bool held)
{
	if (held)
		other_writes = true;
	claim_wal_end = XactLastRecEnd;
}

/* Before commit: a transaction of nothing but claims commits asynchronously. */
void
SyncClaimsAtPreCommit(void)
{
	if (!XLogRecPtrIsInvalid(claim_wal_end) && !other_writes &&
		XactLastRecEnd == claim_wal_end && !queue_synchronous_claims &&
		synchronous_commit > SYNCHRONOUS_COMMIT_OFF)
		(void) set_config_option("synchronous_commit", "off",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
}

/* The transaction ended. */
void
SyncClaimsAtEnd(void)
{
	claim_wal_end = InvalidXLogRecPtr;
	other_writes = false;
}
