/*-------------------------------------------------------------------------
 *
 * xact.c
 *	  What a transaction tells the queues' shared state when it ends.
 *
 * Jobs a transaction makes ready become claimable only when it commits,
 * and jobs it claimed become ready again if it aborts; the claim cursor
 * (shmem.c) must be lowered at exactly those moments, after the change is
 * visible to others.  Work recorded inside a subtransaction is forgotten
 * if the subtransaction rolls back, and handed to the parent if it
 * commits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "queue.h"

typedef struct PendingQueue
{
	int32		qno;
	int			nest;			/* subtransaction level that recorded it */
	bool		made_ready;		/* lower the cursor at commit ... */
	int32		ready_prio;
	int64		ready_rank;
	bool		claimed;		/* ... or at abort */
	int32		claim_prio;
	int64		claim_rank;
	bool		reset;			/* reset the cursor at end, either way */
	bool		forget;			/* drop the shared state at commit */
	int64		completed;
	int64		failed;
} PendingQueue;

static List *pending = NIL;

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

void
QueueXactMadeReady(int32 qno, int32 prio, int64 rank)
{
	PendingQueue *p;

	if (!QueueShmemActive())
		return;
	p = pending_entry(qno);
	if (!p->made_ready || prio > p->ready_prio ||
		(prio == p->ready_prio && rank < p->ready_rank))
	{
		p->made_ready = true;
		p->ready_prio = prio;
		p->ready_rank = rank;
	}
}

void
QueueXactClaimed(int32 qno, int32 prio, int64 rank)
{
	PendingQueue *p;

	if (!QueueShmemActive())
		return;
	p = pending_entry(qno);
	if (!p->claimed || prio > p->claim_prio ||
		(prio == p->claim_prio && rank < p->claim_rank))
	{
		p->claimed = true;
		p->claim_prio = prio;
		p->claim_rank = rank;
	}
}

void
QueueXactResetAtEnd(int32 qno, bool forget)
{
	PendingQueue *p;

	if (!QueueShmemActive())
		return;
	p = pending_entry(qno);
	p->reset = true;
	p->forget |= forget;
}

void
QueueXactFinished(int32 qno, int64 completed, int64 failed)
{
	PendingQueue *p;

	if (!QueueShmemActive())
		return;
	p = pending_entry(qno);
	p->completed += completed;
	p->failed += failed;
}

/* What an abort must do: make claimed jobs reachable again. */
static void
apply_abort(PendingQueue *p)
{
	if (p->reset)
		QueueCursorReset(p->qno);
	else if (p->claimed)
		QueueCursorLower(p->qno, p->claim_prio, p->claim_rank);
}

static void
apply_commit(PendingQueue *p)
{
	if (p->forget)
	{
		QueueSharedForget(p->qno);
		return;
	}
	if (p->reset)
		QueueCursorReset(p->qno);
	else if (p->made_ready)
		QueueCursorLower(p->qno, p->ready_prio, p->ready_rank);
	if (p->completed != 0 || p->failed != 0)
		QueueCountFinished(p->qno, p->completed, p->failed);
}

static void
queue_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (pending == NIL)
		return;

	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:

			/*
			 * Its jobs would become visible (or claimable again) at COMMIT
			 * or ROLLBACK PREPARED, in another session, where nothing would
			 * lower the cursor for them.
			 */
			foreach(lc, pending)
			{
				PendingQueue *p = (PendingQueue *) lfirst(lc);

				if (p->made_ready || p->claimed || p->reset)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("cannot PREPARE a transaction that enqueued, claimed or rescheduled jobs"),
							 errhint("Commit it directly, or move the queue calls out of the prepared transaction.")));
			}
			pending = NIL;
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			foreach(lc, pending)
				apply_commit((PendingQueue *) lfirst(lc));
			pending = NIL;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			foreach(lc, pending)
				apply_abort((PendingQueue *) lfirst(lc));
			pending = NIL;
			break;
		default:
			break;
	}
}

static void
queue_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			nest = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (pending == NIL)
		return;

	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, pending)
		{
			PendingQueue *p = (PendingQueue *) lfirst(lc);

			if (p->nest >= nest)
				p->nest = nest - 1;
		}
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
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
}

void
QueueXactInit(void)
{
	RegisterXactCallback(queue_xact_callback, NULL);
	RegisterSubXactCallback(queue_subxact_callback, NULL);
}
