/*-------------------------------------------------------------------------
 *
 * queueentry.h
 *	  A queue's entry in shared memory segment "queue state", for the
 *	  files of that segment only (queuestate.c, queuecounts.c,
 *	  ratelimit.c).
 *
 * Locking: see queuestate.c.  QueueEntryAcquire returns with the segment's
 * LWLock held shared, QueueEntryRelease lets it go; the entry's fields
 * are read and written under its spinlock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SHMEM_QUEUEENTRY_H
#define QUEUE_SHMEM_QUEUEENTRY_H

#include "datatype/timestamp.h"
#include "storage/spin.h"

#include "base/job.h"

#define RECENT_SECONDS		60

/*
 * How many of the latest due times noted (QueueDueLower) a queue keeps, so
 * that a due time computed meanwhile can take them in rather than be
 * thrown away: every leased claim notes its lease, so with several
 * consumers a promotion's next due time would otherwise rarely survive.
 */
#define DUE_NOTED			16

typedef struct QueueSharedKey
{
	Oid			dboid;
	int32		qno;
} QueueSharedKey;

typedef struct QueueShared
{
	QueueSharedKey key;
	slock_t		mutex;
	bool		cursor_valid;
	int32		cursor_prio;
	int64		cursor_rank;
	uint64		gen;
	int32		hint_prio;		/* claims in flight cover the jobs before */
	int64		hint_rank;		/* ... (hint_prio, hint_rank) */
	uint64		hint_gen;		/* ... while gen is still this */
	bool		skip_valid;		/* a claim passed over a job it could not take */
	int32		skip_prio;		/* ... the first such job in claim order */
	int64		skip_rank;
	TimestampTz skip_at;		/* ... since when */
	TimestampTz promote_checked;
	bool		notify_pending;
	bool		may_wait;		/* a claim came back short since the last NOTIFY */
	TimestampTz notified_at;	/* that NOTIFY */
	TimestampTz notify_after;	/* not before then: the rate limit's next token */
	TimestampTz next_due;		/* when upkeep is due next; 0 unknown */
	uint64		due_gen;
	TimestampTz due_noted[DUE_NOTED];	/* what the latest due_gen bumps noted */
	bool		leases_loaded;	/* xact/leases.c knows the queue's batch leases */
	bool		counts_valid;
	uint64		counts_gen;
	int64		counts[JS_NSTATES];
	/* the oldest ready job, as of counts_gen (queuecounts.c) */
	uint64		oldest_gen;
	bool		oldest_valid;
	TimestampTz oldest_since;	/* 0: no ready job */
	/* when the archive ring may have work next; 0 unknown (queuecounts.c) */
	uint64		archive_gen;
	TimestampTz archive_next;
	/* the rate limit's token bucket, as of rate_at; 0: full (ratelimit.c) */
	double		rate_tokens;
	TimestampTz rate_at;
	bool		rate_short;		/* a take got fewer than it asked since a give-back */
	int64		bucket_sec[RECENT_SECONDS];
	int64		completed[RECENT_SECONDS];
	int64		failed[RECENT_SECONDS];
} QueueShared;

extern QueueShared *QueueEntryAcquire(int32 qno);
extern void QueueEntryRelease(void);

#endif							/* QUEUE_SHMEM_QUEUEENTRY_H */
