/*-------------------------------------------------------------------------
 *
 * wakeups.c
 *	  Who is woken when: waiting claims (shmem/waits.c), and the worker of
 *	  the database (shmem/databases.c), which sends NOTIFYs and promotes
 *	  scheduled jobs.
 *
 * Producers never send NOTIFY themselves (a NOTIFY takes a database-wide
 * lock at commit that serializes every notifying transaction).  Instead,
 * when a transaction that made jobs ready commits (xact/pending.c), it
 * wakes claims waiting on the queue and, if anyone in the database listens
 * (shmem/listeners.c), marks the queue (shmem/queuestate.c) and sets its
 * database worker's latch; the worker sends one NOTIFY per marked queue.
 *
 * Locking: this file keeps no state of its own; each segment it uses
 * follows its own locking note.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"

#include "shmem/databases.h"
#include "shmem/listeners.h"
#include "shmem/queuestate.h"
#include "shmem/waits.h"
#include "shmem/wakeups.h"

/*
 * A committed transaction made n jobs of queue qno claimable (n <= 0: an
 * unknown number): wake as many waiting claims, and have the worker notify
 * listeners.
 */
void
QueueSignalReady(int32 qno, int64 n)
{
	if (!QueueWaitActive())
		return;

	/*
	 * One more claim than jobs: the one that slept longest comes first, and
	 * may not be the first to get a CPU.  Woken alone, it made the slowest
	 * 1% of jobs wait 0.2-0.5 ms longer with 32 claims waiting; the spare
	 * costs the claim that loses the race a look at the queue.
	 */
	QueueWaitWake(qno, n <= 0 ? 0 : n + 1);
	if (!QueueAnyListener(MyDatabaseId))
		return;
	switch (QueueMarkNotify(qno, 0))
	{
		case 1:
			QueueDbWake(MyDatabaseId, QUEUE_DB_NOTIFY, 0);
			break;
		case -1:
			/* no shared entry for this queue: notify them all */
			QueueDbWake(MyDatabaseId, QUEUE_DB_NOTIFY_ALL, 0);
			break;
		default:
			break;				/* already pending */
	}
}

/*
 * Queue qno's due time changed, or is past and unhandled: wake a waiting
 * claim to promote the jobs or to time its sleep to the new due time
 * (QueueWaitTimed).
 */
void
QueueSignalDue(int32 qno)
{
	QueueWaitWake(qno, 1);
}

/*
 * A claim of queue qno came back short: its consumer may wait for a
 * notification now, so the worker sends any it held back (see
 * QueueCollectNotifications).
 */
void
QueueSignalClaimShort(int32 qno)
{
	if (QueueMarkMayWait(qno))
		QueueDbWake(MyDatabaseId, QUEUE_DB_NOTIFY, 0);
}

/*
 * A claim of queue qno found its rate limit's bucket empty before the jobs
 * it could have taken: the queue's listeners are owed a notification when
 * the next token comes, at, and not before (a claim would find none).
 */
void
QueueSignalRateRefill(int32 qno, TimestampTz at)
{
	if (QueueWaitActive() && QueueAnyListener(MyDatabaseId) && QueueMarkNotify(qno, at) == 1)
		QueueDbWake(MyDatabaseId, QUEUE_DB_NOTIFY, 0);
}

/* A claim gave n tokens of queue qno's rate limit back: wake as many claims. */
void
QueueSignalTokensBack(int32 qno, int n)
{
	QueueWaitWake(qno, n);
}

/* A committed transaction scheduled a job of this database for at. */
void
QueueSignalScheduled(TimestampTz at)
{
	QueueDbWake(MyDatabaseId, 0, at);
}

/* A backend that committed claims is exiting: its jobs may be orphans. */
void
QueueSignalClaimerExit(void)
{
	QueueDbWake(MyDatabaseId, QUEUE_DB_ORPHANS, 0);
}

/* A committed transaction changed schedules of this database. */
void
QueueSignalSchedules(void)
{
	QueueDbWake(MyDatabaseId, QUEUE_DB_SCHEDULES, 0);
}
