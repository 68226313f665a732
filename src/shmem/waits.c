/*-------------------------------------------------------------------------
 *
 * waits.c
 *	  Shared memory segment "queue waits": the condition variables that
 *	  claim(wait =>) sleeps on.
 *
 * Wait slots are condition variables plus counters, indexed by a hash of
 * (database, queue).  shmem/wakeups.c decides whom to wake and when; this
 * file is how.
 *
 * Locking: none; the counters are atomics, read and moved in the order the
 * comments below give, and no lock is held across a wait.
 *
 * A commit that made n jobs ready wakes n + 1 waiting claims, not all of them:
 * with 32 claims waiting on a queue fed 200 jobs a second, waking them all
 * for each job doubled the server's CPU per job (docs/design.md, "Waking
 * consumers").  What makes that safe is in QueueWaitWake and the comment
 * above QueueWaitBegin.  A slot on which claims of two queues have slept
 * wakes them all, as the one woken could be waiting on the other queue;
 * so does one on which a claim slept that cannot see new jobs.  Of the
 * claims waiting for a queue's next scheduled job, one sleeps until it
 * falls due (QueueWaitTimed), and a new due time wakes one.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "shmem/waits.h"

#define QUEUE_WAIT_SLOTS	1024

/* A commit that made this many jobs ready wakes every waiting claim. */
#define WAKE_ALL_FROM		8

typedef struct QueueWaitSlot
{
	ConditionVariable cv;
	pg_atomic_uint64 gen;
	pg_atomic_uint32 waiters;	/* claims waiting on the slot's queues */
	pg_atomic_uint64 left_at;	/* when one of them last returned */
	pg_atomic_uint64 tag;		/* wait_tag() of the first queue slept on */
	pg_atomic_uint32 shared;	/* claims that may not take its jobs slept here */
	pg_atomic_uint64 timer;		/* the due time one claim sleeps until, or 0 */
	pg_atomic_uint32 timer_gen;	/* moves whenever a claim takes or frees it */
} QueueWaitSlot;

typedef struct QueueWaitShared
{
	QueueWaitSlot slots[QUEUE_WAIT_SLOTS];
} QueueWaitShared;

static QueueWaitShared *waits = NULL;

/* The slot this backend counts itself a waiter of, between begin and done. */
static QueueWaitSlot *my_wait = NULL;
static int	my_wait_nest;		/* the (sub)transaction the claim runs in */

/* The slot a waiting claim last prepared to sleep on, and its counter then. */
static QueueWaitSlot *my_sleep = NULL;
static uint64 my_sleep_gen;
static int	my_sleep_nest;

/* The slot whose timer this claim is (QueueWaitTimed), and for when. */
static QueueWaitSlot *my_timer_slot = NULL;
static TimestampTz my_timer = 0;

/*
 * The due time this backend last woke another claim to be timed to, and
 * the slot's timer_gen then.
 */
static TimestampTz my_passed = 0;
static uint32 my_passed_gen = 0;

Size
QueueWaitShmemSize(void)
{
	return sizeof(QueueWaitShared);
}

/* At shared memory startup, with AddinShmemInitLock held. */
void
QueueWaitShmemInit(void)
{
	bool		found;

	waits = ShmemInitStruct("queue waits", QueueWaitShmemSize(), &found);
	if (!found)
	{
		for (int i = 0; i < QUEUE_WAIT_SLOTS; i++)
		{
			QueueWaitSlot *w = &waits->slots[i];

			ConditionVariableInit(&w->cv);
			pg_atomic_init_u64(&w->gen, 0);
			pg_atomic_init_u32(&w->waiters, 0);
			pg_atomic_init_u64(&w->left_at, 0);
			pg_atomic_init_u64(&w->tag, 0);
			pg_atomic_init_u32(&w->shared, 0);
			pg_atomic_init_u64(&w->timer, 0);
			pg_atomic_init_u32(&w->timer_gen, 0);
		}
	}
}

/* Whether claims can wait: the library was preloaded. */
bool
QueueWaitActive(void)
{
	return waits != NULL;
}

/*
 * Which (database, queue) a claim sleeps for: exactly, since hashes of
 * different pairs can be equal (a queue number is small, and database
 * oids are close).  Never 0.
 */
static uint64
wait_tag(int32 qno)
{
	return ((uint64) MyDatabaseId << 32) | (uint32) qno;
}

static QueueWaitSlot *
wait_slot(int32 qno)
{
	return &waits->slots[hash_combine(MyDatabaseId, (uint32) qno) % QUEUE_WAIT_SLOTS];
}

/*
 * Move a slot's counter.  A claim that moves it during its own look (its
 * promotion found the next due time) has not missed anything by it: only
 * a move by someone else makes it look again or hand a wakeup on.
 */
static void
bump_gen(QueueWaitSlot *w)
{
	uint64		was = pg_atomic_fetch_add_u64(&w->gen, 1);

	if (my_sleep == w && was == my_sleep_gen)
		my_sleep_gen = was + 1;
}

/*
 * Wake n claims waiting on a slot's queue, or all of them: for n <= 0, for
 * more than WAKE_ALL_FROM, and on a shared slot.  The counter moves first, so that
 * a claim between its look at the queue and its sleep does not sleep
 * (QueueWaitSleep): such a claim is still on the condition variable's list,
 * and may be the one woken here.  Not ourselves, though: a claim that wakes
 * others while on the list (its promotion stored the next due time) could
 * be the one woken, and would then swallow the wakeup.  Off the list, it
 * looks again before it sleeps: the counter moved since it prepared to.
 */
static void
wake_claims(QueueWaitSlot *w, int64 n)
{
	if (my_sleep == w)
		ConditionVariableCancelSleep();
	bump_gen(w);
	if (n <= 0 || n > WAKE_ALL_FROM || pg_atomic_read_u32(&w->shared) != 0)
		ConditionVariableBroadcast(&w->cv);
	else
		for (int64 i = 0; i < n; i++)
			ConditionVariableSignal(&w->cv);
}

/*
 * Wake n claims waiting on queue qno (n <= 0: all of them); see
 * wake_claims.
 */
void
QueueWaitWake(int32 qno, int64 n)
{
	if (waits != NULL)
		wake_claims(wait_slot(qno), n);
}

/*
 * No longer the timer of a slot.  A claim that gives up a due time still
 * to come wakes another to take it on, unless it is only moving to another
 * due time (QueueWaitTimed), or another claim has taken the timer over.
 * One taken over and then freed again (an earlier time came and went) is
 * handed on too.  Returns whether it woke a claim.
 */
static bool
timer_release(bool hand_on)
{
	QueueWaitSlot *w = my_timer_slot;
	TimestampTz mine = my_timer;
	uint64		cur = (uint64) mine;

	if (w == NULL)
		return false;
	my_timer_slot = NULL;
	my_timer = 0;
	if (!pg_atomic_compare_exchange_u64(&w->timer, &cur, 0) && cur != 0)
		return false;
	pg_atomic_fetch_add_u32(&w->timer_gen, 1);
	if (!hand_on || mine <= GetCurrentTimestamp())
		return false;
	wake_claims(w, 1);
	return true;
}

/*
 * Whether a waiting claim of queue qno, whose due time at is after now and
 * before the claim's deadline, should sleep until then.  One claim per
 * queue does: with every claim timed to the due time, 32 claims waiting
 * on a queue whose jobs fell due 200 times a second all woke for each job
 * (docs/design.md, "Waking consumers").  The others sleep until woken;
 * the timer wakes one of them whenever it leaves before its time (it
 * returned with other jobs, reached its deadline, or failed), and so does
 * every change of the due time (QueueSignalDue in shmem/wakeups.c).  A timer for a time
 * already past is free; an earlier due time takes the timer over.  On a
 * shared slot the timer could be for another queue's due time: every claim
 * sleeps to its own.
 */
bool
QueueWaitTimed(int32 qno, TimestampTz at, TimestampTz now)
{
	QueueWaitSlot *w = wait_slot(qno);
	uint64		cur;

	if (my_timer_slot == w && my_timer == at &&
		pg_atomic_read_u64(&w->timer) == (uint64) at)
		return true;
	timer_release(false);
	if (pg_atomic_read_u32(&w->shared) != 0)
		return true;
	cur = pg_atomic_read_u64(&w->timer);
	do
	{
		if (cur != 0 && (TimestampTz) cur > now && (TimestampTz) cur <= at)
			return false;
	} while (!pg_atomic_compare_exchange_u64(&w->timer, &cur, (uint64) at));
	pg_atomic_fetch_add_u32(&w->timer_gen, 1);
	my_timer_slot = w;
	my_timer = at;
	return true;
}

/*
 * A waiting claim sleeps until woken or its deadline, not until the queue's
 * due time due (0 if unknown or past): it cannot wait that long, or cannot
 * promote (a claim in a transaction block on a queue with max_running, or
 * on a paused queue).  If the due time is to come and no claim is timed
 * to it (or to an earlier one), this one may have been woken to be: it
 * wakes another instead.  Once per due time and round of the timer (it
 * was taken or freed since), so that claims none of which can take it
 * pass the wakeup round once, not for ever.
 */
void
QueueWaitUntimed(TimestampTz due, TimestampTz now)
{
	QueueWaitSlot *w = my_sleep;
	uint64		cur;
	uint32		gen;

	if (timer_release(true) || w == NULL || due <= now || due == DT_NOEND ||
		pg_atomic_read_u32(&w->shared) != 0)
		return;
	gen = pg_atomic_read_u32(&w->timer_gen);
	cur = pg_atomic_read_u64(&w->timer);
	if ((cur != 0 && (TimestampTz) cur > now && (TimestampTz) cur <= due) ||
		(due == my_passed && gen == my_passed_gen))
		return;
	my_passed = due;
	my_passed_gen = gen;
	wake_claims(w, 1);
}

/*
 * claim(wait =>) support.  A claim that may wait counts itself a waiter
 * (QueueWaitBegin) until it returns (QueueWaitDone), or its transaction
 * ends if it fails (QueueWaitAtEnd), so that the worker can leave due
 * times to it (QueueWaitersPresent).  QueueWaitPrepare returns the slot's counter
 * after registering as a sleeper; QueueWaitSleep sleeps unless the counter
 * moved meanwhile, so a broadcast between the two is never missed even if
 * the claim in between consumed our latch.  It returns true if it slept the
 * whole timeout.
 *
 * A claim is on the condition variable's list from QueueWaitPrepare on,
 * also while it looks at the queue, so the one claim a new job wakes may
 * be one that is looking already, with a snapshot too old to see the job.
 * If that look found nothing, the claim does not sleep (the counter moved)
 * and looks again.  If it found other jobs, or its time is up, it returns:
 * QueueWaitDone then wakes another claim in its stead, as does a claim
 * that fails (QueueWaitAtEnd), since it may have been woken for a job.
 */
void
QueueWaitBegin(int32 qno)
{
	if (waits == NULL || my_wait != NULL)
		return;
	my_wait = wait_slot(qno);
	my_wait_nest = GetCurrentTransactionNestLevel();
	pg_atomic_fetch_add_u32(&my_wait->waiters, 1);
}

/*
 * The (sub)transaction at nesting level nest ends, 0 for the top level:
 * a claim still counted as waiting in it failed.  A subtransaction that
 * the claim itself started and ended (a trigger's exception block) is not
 * the claim's end.
 */
void
QueueWaitAtEnd(int nest)
{
	if (my_sleep != NULL && (nest == 0 || nest <= my_sleep_nest))
	{
		/* (the abort has taken us off the condition variable's list) */
		wake_claims(my_sleep, 2);
		my_sleep = NULL;
		timer_release(true);
	}
	if (my_wait == NULL || (nest > 0 && nest > my_wait_nest))
		return;
	pg_atomic_write_u64(&my_wait->left_at, (uint64) GetCurrentTimestamp());
	pg_atomic_fetch_sub_u32(&my_wait->waiters, 1);
	my_wait = NULL;
}

/*
 * Whether claims may be waiting on queue qno (or one sharing its slot), or
 * one returned at or after since.  A consumer that takes one job at a time
 * spends part of each job outside its claim (completing it, say): counted
 * only while inside, a pair of them taking jobs due a millisecond apart
 * was often nowhere, and the worker promoted in their stead (see
 * run_upkeep).
 */
bool
QueueWaitersPresent(int32 qno, TimestampTz since)
{
	QueueWaitSlot *w;

	if (waits == NULL)
		return false;
	w = wait_slot(qno);
	return pg_atomic_read_u32(&w->waiters) > 0 ||
		(TimestampTz) pg_atomic_read_u64(&w->left_at) >= since;
}

/*
 * blind: this claim cannot see jobs committed while it waits (its snapshot
 * is the transaction's, or row security may hide them from it).
 */
uint64
QueueWaitPrepare(int32 qno, bool blind)
{
	QueueWaitSlot *w = wait_slot(qno);
	uint64		tag = wait_tag(qno);
	uint64		seen = pg_atomic_read_u64(&w->tag);

	/*
	 * Before we are on the list, where a wakeup meant for a claim that can
	 * take the job could reach us instead: from then on commits wake every
	 * claim of the slot.  A signaller that read the flag just before we
	 * set it may still wake us, but any claim it was meant for that slept
	 * already is ahead of us on the list, and one that registers after its
	 * counter moved does not sleep.
	 */
	if (seen == 0 && pg_atomic_compare_exchange_u64(&w->tag, &seen, tag))
		seen = tag;
	if ((seen != tag || blind) && pg_atomic_read_u32(&w->shared) == 0)
	{
		pg_atomic_write_u32(&w->shared, 1);
		pg_memory_barrier();
	}
	ConditionVariablePrepareToSleep(&w->cv);
	my_sleep = w;
	my_sleep_nest = GetCurrentTransactionNestLevel();
	my_sleep_gen = pg_atomic_read_u64(&w->gen);
	return my_sleep_gen;
}

bool
QueueWaitSleep(int32 qno, uint64 gen, long timeout_ms)
{
	QueueWaitSlot *w = wait_slot(qno);

	if (pg_atomic_read_u64(&w->gen) != gen)
		return false;
	return ConditionVariableTimedSleep(&w->cv, timeout_ms, PG_WAIT_EXTENSION);
}

void
QueueWaitDone(void)
{
	ConditionVariableCancelSleep();
	/* woken during our last look, perhaps for a job it did not see */
	if (my_sleep != NULL && pg_atomic_read_u64(&my_sleep->gen) != my_sleep_gen)
		wake_claims(my_sleep, 2);
	my_sleep = NULL;
	timer_release(true);
	QueueWaitAtEnd(0);
}
