/*-------------------------------------------------------------------------
 *
 * pending.c
 *	  What a transaction tells the queues' shared state when it ends: the
 *	  changes it made to each queue, applied at commit or undone at abort.
 *
 * Jobs a transaction makes ready become claimable only when it commits,
 * and jobs it claimed become ready again if it aborts; the claim cursor
 * (shmem/queuestate.c) must be lowered at exactly those moments, after the change is
 * visible to others.  Work recorded inside a subtransaction is forgotten
 * if the subtransaction rolls back, and handed to the parent if it
 * commits.
 *
 * At commit the same moment wakes others (shmem/wakeups.c): claims waiting
 * on the queue, the worker that NOTIFYs listeners, and the worker that
 * promotes scheduled jobs when the new job is due earlier than anything it
 * knew.
 *
 * xact/xact.c calls the steps at the end of each (sub)transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/job.h"
#include "shmem/leasemap.h"
#include "shmem/owners.h"
#include "shmem/queuestate.h"
#include "shmem/wakeups.h"
#include "xact/pending.h"

typedef struct PendingQueue
{
	int32		qno;
	int			nest;			/* subtransaction level that recorded it */
	bool		made_ready;		/* lower the cursor at commit ... */
	int32		ready_prio;
	int64		ready_rank;
	bool		claimed;		/* ... or at abort */
	bool		took;			/* the claims took jobs: wake others at abort */
	int32		claim_prio;
	int64		claim_rank;
	bool		reset;			/* reset the cursor at end, either way */
	bool		reset_due;		/* and forget the due time at commit */
	bool		unskip;			/* QueueCursorUnskip at end, either way */
	bool		forget;			/* drop the shared state at commit */
	TimestampTz scheduled_at;	/* earliest job or lease due, or 0 */
	bool		jobs_due;		/* a job (not a lease) falls due then */
	TimestampTz next_due;		/* a promotion found the next due time, or 0 */
	uint64		next_due_gen;
	TimestampTz promoted_at;	/* it promoted the jobs due by then, or 0 */
	bool		recount;		/* counts changed wholesale: recount */
	bool		zero_counts;	/* a new, empty queue: counts are zero */
	uint64		zero_gen;
	int64		counts[JS_NSTATES]; /* changes to the counts of each state */
	int64		completed;
	int64		failed;
	int64		ready_n;		/* jobs it made ready: wake as many claims */
	int64		slots_freed;	/* max_running slots it freed: and as many */
} PendingQueue;

static List *pending = NIL;

/* whether this transaction changed schedules (queue.queue_schedules) */
static bool schedules_changed = false;

static PendingQueue *
pending_entry(int32 qno)
{
	int			nest = GetCurrentTransactionNestLevel();
	ListCell   *lc;
	PendingQueue *p;
	MemoryContext old;

	foreach(lc, pending)
	{
		p = (PendingQueue *) lfirst(lc);
		if (p->qno == qno && p->nest == nest)
			return p;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	p = palloc0(sizeof(PendingQueue));
	p->qno = qno;
	p->nest = nest;
	pending = lappend(pending, p);
	MemoryContextSwitchTo(old);
	return p;
}

/* n jobs became ready, the first in queue order at (prio, rank). */
void
QueueXactMadeReady(int32 qno, int32 prio, int64 rank, int64 n)
{
	PendingQueue *p;

	if (!QueueStateActive())
		return;
	p = pending_entry(qno);
	p->ready_n += n;
	if (!p->made_ready || prio > p->ready_prio ||
		(prio == p->ready_prio && rank < p->ready_rank))
	{
		p->made_ready = true;
		p->ready_prio = prio;
		p->ready_rank = rank;
	}
}

void
QueueXactClaimed(int32 qno, int32 prio, int64 rank, bool took)
{
	PendingQueue *p;

	if (!QueueStateActive())
		return;
	p = pending_entry(qno);
	p->took |= took;
	if (!p->claimed || prio > p->claim_prio ||
		(prio == p->claim_prio && rank < p->claim_rank))
	{
		p->claimed = true;
		p->claim_prio = prio;
		p->claim_rank = rank;
	}
}

void
QueueXactResetAtEnd(int32 qno, bool forget, bool keep_due)
{
	PendingQueue *p;

	if (!QueueStateActive())
		return;
	p = pending_entry(qno);
	p->reset = true;
	p->reset_due |= !keep_due;
	p->forget |= forget;
}

/*
 * The transaction may hold locks on ready jobs of queue qno that claims
 * pass over: when it ends, they need not wait for the cursor's recheck.
 */
void
QueueXactUnskipAtEnd(int32 qno)
{
	if (QueueStateActive())
		pending_entry(qno)->unskip = true;
}

/* n jobs stopped running on a queue with max_running: their slots are free. */
void
QueueXactSlotsFreed(int32 qno, int64 n)
{
	if (QueueStateActive() && n > 0)
		pending_entry(qno)->slots_freed += n;
}

/* What this transaction changed in the counts of queue qno, so far. */
void
QueueXactPendingCounts(int32 qno, int64 *counts)
{
	ListCell   *lc;

	foreach(lc, pending)
	{
		PendingQueue *p = (PendingQueue *) lfirst(lc);

		if (p->qno == qno)
			for (int i = 0; i < JS_NSTATES; i++)
				counts[i] += p->counts[i];
	}
}

/* Whether this transaction changed anything of queue qno's so far. */
bool
QueueXactTouched(int32 qno)
{
	ListCell   *lc;

	foreach(lc, pending)
	{
		if (((PendingQueue *) lfirst(lc))->qno == qno)
			return true;
	}
	return false;
}

/*
 * This transaction created the queue: it starts with no jobs.  Makes its
 * shared state now; false if there is no room for it (queue.max_queues),
 * or no shared memory at all.  An abort gives the entry back.
 */
bool
QueueXactNewQueue(int32 qno)
{
	PendingQueue *p;
	int64		counts[JS_NSTATES];

	if (!QueueStateActive())
		return false;
	p = pending_entry(qno);
	p->zero_counts = true;
	(void) QueueCountsGet(qno, counts, &p->zero_gen);
	return QueueStateHas(qno);
}

/* This transaction changed job states in ways it did not count. */
void
QueueXactRecount(int32 qno)
{
	if (QueueStateActive())
		pending_entry(qno)->recount = true;
}

/* Something this transaction did falls due at at: a job, or a lease. */
static void
note_due(int32 qno, TimestampTz at, bool job)
{
	PendingQueue *p;

	if (!QueueStateActive())
		return;
	p = pending_entry(qno);
	if (p->scheduled_at == 0 || at < p->scheduled_at)
		p->scheduled_at = at;
	p->jobs_due |= job;
}

/*
 * This transaction promoted the jobs due by promoted_at and found when the
 * queue falls due next, in a snapshot taken after gen was read
 * (QueueDueGet).  Stored at once, so that claims waiting on the queue wake
 * for the next job on their own while this transaction goes on to commit
 * (a flush that can take tens of ms) or, in a transaction block, to work:
 * until then the due time is that of the jobs we hold, and they would
 * sleep until we commit or the worker steps in.  Stored again at commit,
 * over whatever a look that still saw our jobs as scheduled stored
 * meanwhile.  Both stores only raise the due time: ours is at or before
 * every job still scheduled (our snapshot saw the jobs whose due times
 * were noted before gen, QueueDueSet takes in those noted since), so a
 * later time is that of a claim that promoted our next jobs meanwhile.
 * Put back over that, ours was a due time already past, which waiting
 * claims leave to the worker (about 1% of the jobs of a stream due 200
 * times a second were late by the worker's grace, 10 ms).  If we abort,
 * our jobs are due again (apply_abort).
 */
void
QueueXactNextDue(int32 qno, TimestampTz promoted_at, TimestampTz due, uint64 gen)
{
	PendingQueue *p;

	if (!QueueStateActive())
		return;
	p = pending_entry(qno);
	p->next_due = due;
	p->next_due_gen = gen;
	if (p->promoted_at == 0 || promoted_at < p->promoted_at)
		p->promoted_at = promoted_at;
	if (QueueDueSet(qno, due, gen, true))
		QueueSignalDue(qno);
}

void
QueueXactScheduled(int32 qno, TimestampTz run_at)
{
	note_due(qno, run_at, true);
}

/* A lease taken now runs out at until: the worker must know. */
void
QueueXactLeased(int32 qno, TimestampTz until)
{
	note_due(qno, until, false);
}

/* n jobs went from one stored state to another (JS_NONE: in or out). */
void
QueueXactCount(int32 qno, JobState from, JobState to, int64 n)
{
	PendingQueue *p;

	if (!QueueStateActive() || n == 0)
		return;
	p = pending_entry(qno);
	if (from != JS_NONE)
		p->counts[from] -= n;
	if (to != JS_NONE)
		p->counts[to] += n;
}

void
QueueXactFinished(int32 qno, int64 completed, int64 failed)
{
	PendingQueue *p;

	if (!QueueStateActive())
		return;
	p = pending_entry(qno);
	p->completed += completed;
	p->failed += failed;
}

/*
 * Where this transaction's own claims must start scanning queue qno: jobs
 * it made ready itself are visible to it before commit lowers the shared
 * cursor for everyone.  Returns false if it must start at the front.
 */
bool
QueueXactScanStart(int32 qno, int32 *prio, int64 *rank)
{
	ListCell   *lc;

	foreach(lc, pending)
	{
		PendingQueue *p = (PendingQueue *) lfirst(lc);

		if (p->qno != qno)
			continue;
		if (p->reset)
			return false;
		if (p->made_ready &&
			(p->ready_prio > *prio || (p->ready_prio == *prio && p->ready_rank < *rank)))
		{
			*prio = p->ready_prio;
			*rank = p->ready_rank;
		}
	}
	return true;
}

/*
 * What an abort must do: make claimed jobs reachable again, and give back
 * the shared state of a queue it created.
 */
static void
apply_abort(PendingQueue *p)
{
	if (p->zero_counts)
	{
		QueueStateForget(p->qno);
		return;
	}
	if (p->unskip)
		QueueCursorUnskip(p->qno);
	if (p->reset)
		QueueCursorReset(p->qno);
	else if (p->claimed)
		QueueCursorLower(p->qno, p->claim_prio, p->claim_rank);
	/* the jobs it promoted are scheduled again, and due */
	if (p->promoted_at != 0)
	{
		(void) QueueDueLower(p->qno, p->promoted_at);
		QueueSignalScheduled(p->promoted_at);
	}
	/*
	 * The jobs it took are ready again, or due, and those it kept locked
	 * (unskip) claimable: wake whoever waits for them.
	 */
	if (p->took || p->reset || p->unskip)
		QueueSignalReady(p->qno, 0);
	else if (p->promoted_at != 0)
		QueueSignalDue(p->qno);
}

static void
apply_counts(PendingQueue *p)
{
	bool		any = false;

	if (p->recount)
	{
		QueueCountsInvalidate(p->qno);
		return;
	}
	if (p->zero_counts)
	{
		int64		zeros[JS_NSTATES] = {0};

		QueueCountsSet(p->qno, p->zero_gen, zeros);
		/* (a queue dropped with its extension may have had the number) */
		LeaseMapForget(MyDatabaseId, p->qno);
	}
	for (int i = 0; i < JS_NSTATES; i++)
		any |= p->counts[i] != 0;
	if (any)
		QueueCountsApply(p->qno, p->counts);
}

static void
apply_commit(PendingQueue *p)
{
	if (p->forget)
	{
		LeaseMapForget(MyDatabaseId, p->qno);
		QueueStateForget(p->qno);
		return;
	}
	if (p->unskip)
		QueueCursorUnskip(p->qno);
	if (p->reset)
	{
		QueueCursorReset(p->qno);
		if (p->reset_due)
		{
			QueueDueLower(p->qno, 0);
			QueueSignalScheduled(GetCurrentTimestamp());
		}
	}
	else if (p->made_ready)
	{
		/* before the waiters we wake read it */
		if (p->next_due != 0)
			(void) QueueDueSet(p->qno, p->next_due, p->next_due_gen, true);
		QueueCursorLower(p->qno, p->ready_prio, p->ready_rank);
	}

	/*
	 * Jobs became claimable: those we made ready, those whose max_running
	 * slots we freed, and (reset, unskip) any number.
	 */
	if (p->reset || p->unskip)
		QueueSignalReady(p->qno, 0);
	else if (p->made_ready || p->slots_freed > 0)
		QueueSignalReady(p->qno, p->ready_n + p->slots_freed);
	if (p->scheduled_at != 0)
	{
		/*
		 * Claims waiting on the queue sleep until its due time at most:
		 * an earlier one is theirs to wake for (see queue_claim).
		 */
		if (QueueDueLower(p->qno, p->scheduled_at) && p->jobs_due)
			QueueSignalDue(p->qno);
		QueueSignalScheduled(p->scheduled_at);
	}
	if (p->claimed)
		QueueOwnerCommitted();
	apply_counts(p);
	if (p->completed != 0 || p->failed != 0)
		QueueCountFinished(p->qno, p->completed, p->failed);
}

/*
 * PREPARE: its jobs would become visible (or claimable again) at COMMIT or
 * ROLLBACK PREPARED, in another session, where nothing would lower the
 * cursor for them.
 */
void
PendingAtPrepare(void)
{
	ListCell   *lc;

	foreach(lc, pending)
	{
		PendingQueue *p = (PendingQueue *) lfirst(lc);

		if (p->made_ready || p->claimed || p->reset || p->scheduled_at != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot PREPARE a transaction that enqueued, claimed or rescheduled jobs"),
					 errhint("Commit it directly, or move the queue calls out of the prepared transaction.")));
	}
	pending = NIL;
	schedules_changed = false;	/* the worker's naptime finds them */
}

void
PendingAtCommit(void)
{
	ListCell   *lc;

	foreach(lc, pending)
		apply_commit((PendingQueue *) lfirst(lc));
	pending = NIL;
	if (schedules_changed)
		QueueSignalSchedules();
	schedules_changed = false;
}

void
PendingAtAbort(void)
{
	ListCell   *lc;

	foreach(lc, pending)
		apply_abort((PendingQueue *) lfirst(lc));
	pending = NIL;
	schedules_changed = false;
}

/*
 * This transaction changed schedules: the worker is to look at them when
 * it commits.  (A subtransaction that rolls back leaves the flag: a look
 * for nothing costs the worker one index probe.)
 */
void
QueueXactSchedulesChanged(void)
{
	schedules_changed = true;
}

/* The subtransaction at level nest committed: its changes are its parent's. */
void
PendingAtSubCommit(int nest)
{
	ListCell   *lc;

	foreach(lc, pending)
	{
		PendingQueue *p = (PendingQueue *) lfirst(lc);

		if (p->nest >= nest)
			p->nest = nest - 1;
	}
}

void
PendingAtSubAbort(int nest)
{
	ListCell   *lc;

	foreach(lc, pending)
	{
		PendingQueue *p = (PendingQueue *) lfirst(lc);

		if (p->nest >= nest)
		{
			apply_abort(p);
			pending = foreach_delete_current(pending, lc);
		}
	}
}
