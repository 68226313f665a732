/*-------------------------------------------------------------------------
 *
 * queuecounts.c
 *	  What queue.stats and the worker's cleanup learn of a queue without
 *	  reading its tables: its jobs counted by state, completions and
 *	  failures of the last minute, its oldest ready job, and when its
 *	  archive ring may have work next.  Part of the segment "queue state"
 *	  (queuestate.c).
 *
 * Committing transactions add what they changed to the counts and bump
 * counts_gen.  What is read from a table (a recount, the oldest ready
 * job) is stored only if counts_gen did not move since before the read's
 * snapshot, and the oldest ready job is known only while counts_gen stays
 * where it was stored: any change to the queue's jobs forgets it.  So an
 * idle queue's statistics cost no read of its table, and a busy queue's
 * are read as they were before.
 *
 * The archive's next work is forgotten when a transaction archived jobs
 * (completions) or changed jobs wholesale (a cancel, a purge): the worker
 * then looks at the ring again (worker/upkeep.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "storage/spin.h"
#include "utils/timestamp.h"

#include "shmem/queueentry.h"
#include "shmem/queuestate.h"

/* With the entry's spinlock held. */
static inline void
archive_forget(QueueShared *e)
{
	e->archive_next = 0;
	e->archive_gen++;
}

void
QueueCountsApply(int32 qno, const int64 *delta)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	for (int i = 0; i < JS_NSTATES; i++)
		e->counts[i] += delta[i];
	e->counts_gen++;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

void
QueueCountsInvalidate(int32 qno)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	e->counts_valid = false;
	e->counts_gen++;
	archive_forget(e);
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

/* The counts if they are valid; gen in any case, for QueueCountsSet. */
bool
QueueCountsGet(int32 qno, int64 *counts, uint64 *gen)
{
	QueueShared *e = QueueEntryAcquire(qno);
	bool		valid;

	*gen = 0;
	if (e == NULL)
		return false;
	SpinLockAcquire(&e->mutex);
	valid = e->counts_valid;
	*gen = e->counts_gen;
	memcpy(counts, e->counts, sizeof(e->counts));
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return valid;
}

void
QueueCountsSet(int32 qno, uint64 gen, const int64 *counts)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	if (e->counts_gen == gen)
	{
		memcpy(e->counts, counts, sizeof(e->counts));
		e->counts_valid = true;
	}
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

void
QueueCountFinished(int32 qno, int64 completed, int64 failed)
{
	QueueShared *e = QueueEntryAcquire(qno);
	int64		sec = GetCurrentTimestamp() / USECS_PER_SEC;
	int			i = sec % RECENT_SECONDS;

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	if (e->bucket_sec[i] != sec)
	{
		e->bucket_sec[i] = sec;
		e->completed[i] = 0;
		e->failed[i] = 0;
	}
	e->completed[i] += completed;
	e->failed[i] += failed;
	if (completed != 0)
		archive_forget(e);
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

bool
QueueRecentCounts(int32 qno, int64 *completed, int64 *failed)
{
	QueueShared *e = QueueEntryAcquire(qno);
	int64		sec = GetCurrentTimestamp() / USECS_PER_SEC;

	*completed = *failed = 0;
	if (e == NULL)
		return false;
	SpinLockAcquire(&e->mutex);
	for (int i = 0; i < RECENT_SECONDS; i++)
	{
		if (e->bucket_sec[i] > sec - RECENT_SECONDS)
		{
			*completed += e->completed[i];
			*failed += e->failed[i];
		}
	}
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return true;
}

/*
 * When queue qno's oldest ready job became ready (0: there is none), if
 * known; gen in any case, for QueueOldestSet.
 */
bool
QueueOldestGet(int32 qno, TimestampTz *since, uint64 *gen)
{
	QueueShared *e = QueueEntryAcquire(qno);
	bool		valid;

	*gen = 0;
	*since = 0;
	if (e == NULL)
		return false;
	SpinLockAcquire(&e->mutex);
	valid = e->oldest_valid && e->oldest_gen == e->counts_gen;
	*gen = e->counts_gen;
	*since = e->oldest_since;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return valid;
}

/* Store the oldest ready job read from a snapshot taken after gen was read. */
void
QueueOldestSet(int32 qno, uint64 gen, TimestampTz since)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	if (e->counts_gen == gen)
	{
		e->oldest_valid = true;
		e->oldest_gen = gen;
		e->oldest_since = since;
	}
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

/*
 * When queue qno's archive ring may have work next (DT_NOEND: not before
 * jobs are archived), if known; gen in any case, for QueueArchiveNextSet.
 */
bool
QueueArchiveNextGet(int32 qno, TimestampTz *next, uint64 *gen)
{
	QueueShared *e = QueueEntryAcquire(qno);

	*gen = 0;
	*next = 0;
	if (e == NULL)
		return false;
	SpinLockAcquire(&e->mutex);
	*gen = e->archive_gen;
	*next = e->archive_next;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return *next != 0;
}

/* Store what the ring showed to a look that began after gen was read. */
void
QueueArchiveNextSet(int32 qno, uint64 gen, TimestampTz next)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	if (e->archive_gen == gen)
		e->archive_next = next;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

/* Forget what is known of queue qno's archive ring (its retention changed). */
void
QueueArchiveForget(int32 qno)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	archive_forget(e);
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}
