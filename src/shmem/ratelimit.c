/*-------------------------------------------------------------------------
 *
 * ratelimit.c
 *	  The token bucket of a queue's rate limit (at most rate_limit jobs
 *	  claimed per rate_period, across all consumers), kept in the queue's
 *	  entry of shared memory segment "queue state".
 *
 * The bucket holds up to rate_limit tokens and gains rate_limit of them
 * per rate_period, evenly; a full bucket may be spent at once.  A claim
 * takes a token for each job it may return, before it looks at the jobs,
 * and gives back at once those it did not use.  A token taken for a job
 * stays spent: a transaction that rolls back after its claim does not get
 * it back, since its consumer may already have called what the limit
 * protects, and a job that comes back (a rollback, an expired lease, a
 * release, a consumer killed) takes a new token when it is claimed again.
 * So nothing lets more than the limit start, and no token is spent on a
 * job that was not handed out, but by a claim that fails with an error
 * between taking its tokens and giving the rest back.  Tokens given back
 * wake claims that found the bucket empty meanwhile.
 *
 * The bucket is in shared memory only: a new entry (the queue's first use
 * since the server started) starts full, so a restart may let one more
 * bucketful through.  A queue without an entry (past queue.max_queues, or
 * without shared_preload_libraries) cannot be limited: QueueRateTake says
 * so, and the claim fails rather than run unlimited.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "storage/spin.h"

#include "shmem/queueentry.h"
#include "shmem/ratelimit.h"

/*
 * Take up to want tokens of queue qno's bucket at time now: returns how
 * many, or -1 if the queue has no shared entry.  When it is fewer than
 * want, *next_at is when the next token comes, else 0.
 */
int
QueueRateTake(int32 qno, int32 limit, int64 period_us, int want, TimestampTz now,
			  TimestampTz *next_at)
{
	QueueShared *e = QueueEntryAcquire(qno);
	double		per_us = (double) limit / (double) period_us;
	double		tokens;
	int			got;

	*next_at = 0;
	if (e == NULL)
		return -1;
	SpinLockAcquire(&e->mutex);
	if (e->rate_at == 0)
	{
		tokens = limit;
		e->rate_at = now;
	}
	else
	{
		tokens = e->rate_tokens;
		/* a claim that read the clock before another's gains nothing */
		if (now > e->rate_at)
		{
			tokens += (double) (now - e->rate_at) * per_us;
			e->rate_at = now;
		}
	}
	/* (also where queue.alter lowered the limit) */
	tokens = Min(tokens, (double) limit);
	got = (int) Min((double) want, floor(tokens + 1e-9));
	tokens -= got;
	e->rate_tokens = tokens;
	if (got < want)
	{
		*next_at = e->rate_at + (TimestampTz) ceil(Max(1.0 - tokens, 0.0) / per_us);
		e->rate_short = true;
	}
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return got;
}

/*
 * Give n tokens taken by QueueRateTake back to queue qno's bucket.  True
 * if a take got fewer than it asked for since the last give-back: claims
 * may be waiting for these.  (Claims of an empty queue give back every
 * token: waking others for them would have them wake each other in turn.)
 */
bool
QueueRateGiveBack(int32 qno, int32 limit, int n)
{
	QueueShared *e;
	bool		was_short;

	if (n <= 0 || (e = QueueEntryAcquire(qno)) == NULL)
		return false;
	SpinLockAcquire(&e->mutex);
	e->rate_tokens = Min(e->rate_tokens + n, (double) limit);
	was_short = e->rate_short;
	e->rate_short = false;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return was_short;
}
