/*-------------------------------------------------------------------------
 *
 * planids.h
 *	  The saved statements each queue has (catalog/plans.c defines them).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_CATALOG_PLANIDS_H
#define QUEUE_CATALOG_PLANIDS_H

typedef enum QueuePlanId
{
	PLAN_INSERT,				/* enqueue one job */
	PLAN_INSERT_DEDUP,			/* enqueue one job with a dedup_key */
	PLAN_FIND_DEDUP,			/* the unfinished job holding a dedup_key */
	PLAN_INSERT_BATCH,			/* enqueue an array of jobs */
	PLAN_PROMOTE,				/* scheduled jobs that came due become ready */
	PLAN_CLAIM_FRONT,			/* claim scanning the ready index from its start */
	PLAN_CLAIM_AT,				/* claim from the cursor within its priority */
	PLAN_CLAIM_BELOW,			/* claim from the priorities below the cursor */
	PLAN_LEASE_FRONT,			/* the same three, marking the jobs running */
	PLAN_LEASE_AT,				/* in place: a claim that is its own transaction */
	PLAN_LEASE_BELOW,
	PLAN_COMPLETE_ARCHIVE,		/* complete, returning the rows for the archive */
	PLAN_COMPLETE_DELETE,		/* complete, retention 0 */
	PLAN_LOCK_RUNNING,			/* lock a running job for fail/release */
	PLAN_FAIL,					/* record a failed attempt */
	PLAN_RELEASE,				/* give a job back without a failure */
	PLAN_EXTEND,				/* push a lease out */
	PLAN_STATE,					/* the state of a job, for error messages */
	PLAN_GROUP_BUSY,			/* does a group have an unfinished job? */
	PLAN_GROUP_ADVANCE,			/* a group's next waiting job becomes active */
	PLAN_GROUP_REQUEUE,			/* a retried job goes behind its group */
	PLAN_GROUP_BUSY_N,			/* PLAN_GROUP_BUSY for group_max_running > 1 */
	PLAN_SLOTS_TAKE,			/* lock free running slots (max_running) */
	PLAN_SLOTS_ASSIGN,			/* give slots to claimed jobs */
	PLAN_SLOTS_FREE,			/* jobs stopped running: free their slots */
	PLAN_SLOTS_MIGRATE,			/* a job over the limit takes a freed slot */
	PLAN_REINSERT,				/* write held jobs back as running rows */
	PLAN_ARCHIVE_HELD,			/* archive held jobs completed in their claim's transaction */
	PLAN_LEASE_INSERT,			/* the row of a batch lease */
	PLAN_LEASE_DELETE,			/* ... gone with its last job */
	PLAN_LEASE_RUNNING,			/* a job leaves its batch lease as a running row */
	PLAN_TICK_EXPIRE,			/* upkeep: expired leases and orphans return */
	PLAN_TICK_NEXT_DUE,			/* upkeep: when to look again */
	PLAN_TICK_LEASE_DUE,		/* upkeep: the first batch lease to run out */
	NUM_QUEUE_PLANS
} QueuePlanId;

/* The claim plans come in this order, the in-place ones after the others. */
#define PLAN_IN_PLACE(claim)	((QueuePlanId) ((claim) + (PLAN_LEASE_FRONT - PLAN_CLAIM_FRONT)))

#endif							/* QUEUE_CATALOG_PLANIDS_H */
