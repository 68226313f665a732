/*-------------------------------------------------------------------------
 *
 * syncclaims.h
 *	  queue.synchronous_claims: commits of claims that need not wait for
 *	  their WAL to reach disk.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_XACT_SYNCCLAIMS_H
#define QUEUE_XACT_SYNCCLAIMS_H

extern void QueueSyncClaimStart(void);
extern void QueueSyncClaimEnd(bool held);

/* steps of the end of a transaction, called by xact/xact.c */
extern void SyncClaimsAtPreCommit(void);
extern void SyncClaimsAtEnd(void);

#endif							/* QUEUE_XACT_SYNCCLAIMS_H */
