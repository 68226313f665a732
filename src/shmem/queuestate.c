/*-------------------------------------------------------------------------
 *
 * queuestate.c
 *	  Shared memory segment "queue state": per-queue state shared by all
 *	  backends: the claim cursor, the due time, the notification marks and
 *	  the counters behind queue.stats.
 *
 * The state lives in a hash table keyed by (database, queue number) of
 * at most queue.max_queues entries, made when a queue is created or first
 * used (past that, a queue runs without).  Without preloading every function
 * here is a no-op: claims scan from the front, recent counts are unknown.
 *
 * The counters behind queue.stats (queuecounts.c) work the same way: committing
 * transactions add what they changed, and a recount (after a restart, or
 * after a management function changed jobs wholesale) is stored only if no
 * transaction applied changes since before the recount's snapshot.
 *
 * Locking: the LWLock protects the hash table's shape; it is held shared
 * to find an entry and to use it, exclusively to add or remove one.  Each
 * entry's fields are protected by its spinlock, held only for a few
 * instructions.
 *
 * The cursor is a lower bound on the claim order: no ready job sorts before
 * (cursor_prio, cursor_rank), where jobs sort by priority descending, then
 * rank.  Claims start their index scan there instead of walking over the
 * dead entries of jobs already claimed.  Anything that may put a ready job
 * before the cursor lowers it (and bumps gen) after the job becomes
 * visible; a claim raises it only if gen did not move since before its
 * snapshot was taken, so a raise can never skip a job it could not see.
 *
 * The hint keeps concurrent claims apart.  A claim raises the cursor only
 * when it ends, so claims starting meanwhile would begin at the same place
 * and fail on every job it is taking.  So a claim that will take up to n
 * jobs from (p, r) reserves the span up to (p, r + n), and claims starting
 * meanwhile begin past it.  Ranks are unique within a queue, so the
 * reserving claim takes every job it can see in the span unless it finds
 * its n first; its snapshot was taken after it read gen, so while gen has
 * not moved it sees every job committed there.  Any lowering bumps gen,
 * and the hint lapses (docs/design.md, "the cursor", point 5).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "base/job.h"
#include "base/settings.h"
#include "shmem/queueentry.h"
#include "shmem/queuestate.h"

#define PROMOTE_INTERVAL_MS	50
#define SKIP_RECHECK_MS		1000

static HTAB *queue_shared_hash = NULL;
static LWLock *queue_shared_lock = NULL;

/*
 * The queues newly marked for NOTIFY, in the order marked, so that the
 * worker looks at those rather than at every queue: a scan of the whole
 * table for each notification made listeners 3 ms later beside 10,000
 * queues than beside 10.  Past NOTIFY_MARKS unread marks (a transaction
 * that enqueues into that many queues, say, or marks of a database whose
 * worker is not running) the list is emptied and overflows moves, and
 * every worker scans the table once: the entries keep their marks.
 */
#define NOTIFY_MARKS		64

typedef struct NotifyMarks
{
	slock_t		mutex;
	uint64		overflows;
	int			n;
	QueueSharedKey marks[NOTIFY_MARKS];
} NotifyMarks;

static NotifyMarks *notify_marks = NULL;

Size
QueueStateShmemSize(void)
{
	return add_size(hash_estimate_size(queue_max_queues, sizeof(QueueShared)), sizeof(NotifyMarks));
}

void
QueueStateRequestLocks(void)
{
	RequestNamedLWLockTranche("queue", 1);
}

/* At shared memory startup, with AddinShmemInitLock held. */
void
QueueStateShmemInit(void)
{
	HASHCTL		info;
	bool		found;

	queue_shared_lock = &(GetNamedLWLockTranche("queue"))->lock;
	info.keysize = sizeof(QueueSharedKey);
	info.entrysize = sizeof(QueueShared);
	queue_shared_hash = ShmemInitHash("queue state",
									  queue_max_queues, queue_max_queues,
									  &info, HASH_ELEM | HASH_BLOBS);
	notify_marks = ShmemInitStruct("queue notify marks", sizeof(NotifyMarks), &found);
	if (!found)
	{
		SpinLockInit(&notify_marks->mutex);
		notify_marks->overflows = 0;
		notify_marks->n = 0;
	}
}

/* The key of queue qno of this database (padding zeroed: keys are blobs). */
static QueueSharedKey
entry_key(int32 qno)
{
	QueueSharedKey key;

	memset(&key, 0, sizeof(key));
	key.dboid = MyDatabaseId;
	key.qno = qno;
	return key;
}

/* The entry of queue qno of this database, with the LWLock held shared; or NULL. */
static QueueShared *
queue_shared_find(int32 qno)
{
	QueueSharedKey key = entry_key(qno);
	QueueShared *entry;

	if (queue_shared_hash == NULL)
		return NULL;
	LWLockAcquire(queue_shared_lock, LW_SHARED);
	entry = hash_search(queue_shared_hash, &key, HASH_FIND, NULL);
	if (entry == NULL)
		LWLockRelease(queue_shared_lock);
	return entry;
}

/*
 * Find (or make) the entry of a queue of the current database.  Returns
 * with the LWLock held shared, or NULL without it when there is no shared
 * state or the table is full.
 */
QueueShared *
QueueEntryAcquire(int32 qno)
{
	QueueSharedKey key = entry_key(qno);
	QueueShared *entry = queue_shared_find(qno);
	bool		found;

	if (entry != NULL || queue_shared_hash == NULL)
		return entry;

	/* At most max_queues: past its size it would take the lock table's spare */
	LWLockAcquire(queue_shared_lock, LW_EXCLUSIVE);
	entry = hash_search(queue_shared_hash, &key, HASH_FIND, NULL);
	found = entry != NULL;
	if (!found && hash_get_num_entries(queue_shared_hash) < queue_max_queues)
		entry = hash_search(queue_shared_hash, &key, HASH_ENTER_NULL, &found);
	if (entry != NULL && !found)
	{
		SpinLockInit(&entry->mutex);
		entry->cursor_valid = false;
		entry->cursor_prio = 0;
		entry->cursor_rank = 0;
		entry->gen = 0;
		entry->hint_gen = PG_UINT64_MAX;	/* gen never gets there */
		entry->skip_valid = false;
		entry->promote_checked = 0;
		entry->notify_pending = false;
		entry->may_wait = true;	/* listeners may have waited for long */
		entry->notified_at = 0;
		entry->notify_after = 0;
		entry->next_due = 0;
		entry->due_gen = 0;
		memset(entry->due_noted, 0, sizeof(entry->due_noted));
		entry->leases_loaded = false;
		entry->counts_valid = false;
		entry->counts_gen = 0;
		entry->oldest_gen = 0;
		entry->oldest_valid = false;
		entry->oldest_since = 0;
		entry->archive_gen = 0;
		entry->archive_next = 0;
		entry->rate_tokens = 0;
		entry->rate_at = 0;
		entry->rate_short = false;
		memset(entry->bucket_sec, 0, sizeof(entry->bucket_sec));
		memset(entry->completed, 0, sizeof(entry->completed));
		memset(entry->failed, 0, sizeof(entry->failed));
	}
	LWLockRelease(queue_shared_lock);
	/* Look again: queue.drop may have removed it in between. */
	return entry == NULL ? NULL : queue_shared_find(qno);
}

void
QueueEntryRelease(void)
{
	LWLockRelease(queue_shared_lock);
}

bool
QueueStateActive(void)
{
	return queue_shared_hash != NULL;
}

/* Has queue qno its entry?  (Looked up, not made: false past max_queues.) */
bool
QueueStateHas(int32 qno)
{
	if (queue_shared_find(qno) == NULL)
		return false;
	LWLockRelease(queue_shared_lock);
	return true;
}

/* True when (p1, r1) sorts before (p2, r2) in claim order. */
static inline bool
key_before(int32 p1, int64 r1, int32 p2, int64 r2)
{
	return p1 > p2 || (p1 == p2 && r1 < r2);
}

/* The cursor goes back to the first job claims passed over; e is locked. */
static void
cursor_to_skipped(QueueShared *e)
{
	if (e->cursor_valid && key_before(e->skip_prio, e->skip_rank, e->cursor_prio, e->cursor_rank))
	{
		e->cursor_prio = e->skip_prio;
		e->cursor_rank = e->skip_rank;
	}
	e->skip_valid = false;
	e->gen++;
}

/*
 * Where a claim starting at now begins its scan: the cursor, or past the
 * jobs claims in flight have reserved (the hint).  Also returns the
 * generation to pass back to QueueCursorReserve and QueueCursorAdvance.
 *
 * First, once a second at most, the cursor goes back to the first job
 * claims passed over (QueueCursorSkipped): one claim then walks again over
 * the jobs taken since, which is cheap, and a job nobody claimed is found
 * at most a second late.
 */
bool
QueueCursorGet(int32 qno, TimestampTz now, int32 *prio, int64 *rank, uint64 *gen)
{
	QueueShared *e = QueueEntryAcquire(qno);
	bool		valid;

	if (e == NULL)
		return false;
	SpinLockAcquire(&e->mutex);
	if (e->skip_valid && now - e->skip_at >= SKIP_RECHECK_MS * INT64CONST(1000))
		cursor_to_skipped(e);
	valid = e->cursor_valid;
	*prio = e->cursor_prio;
	*rank = e->cursor_rank;
	if (valid && e->hint_gen == e->gen &&
		key_before(*prio, *rank, e->hint_prio, e->hint_rank))
	{
		*prio = e->hint_prio;
		*rank = e->hint_rank;
	}
	*gen = e->gen;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return valid;
}

/*
 * A claim whose fresh snapshot was taken after it read gen will take up to
 * n jobs starting at (prio, rank), where QueueCursorGet told it to start:
 * let claims starting meanwhile begin after them (see the header comment).
 */
void
QueueCursorReserve(int32 qno, int32 prio, int64 rank, int n, uint64 gen)
{
	QueueShared *e;
	int64		end;

	if (pg_add_s64_overflow(rank, n, &end))
		return;
	e = QueueEntryAcquire(qno);
	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	if (e->gen == gen &&
		(e->hint_gen != gen || key_before(e->hint_prio, e->hint_rank, prio, end)))
	{
		e->hint_gen = gen;
		e->hint_prio = prio;
		e->hint_rank = end;
	}
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

void
QueueCursorAdvance(int32 qno, int32 prio, int64 rank, uint64 gen)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	if (e->gen == gen &&
		(!e->cursor_valid || key_before(e->cursor_prio, e->cursor_rank, prio, rank)))
	{
		e->cursor_valid = true;
		e->cursor_prio = prio;
		e->cursor_rank = rank;
	}
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

void
QueueCursorLower(int32 qno, int32 prio, int64 rank)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	if (e->cursor_valid && key_before(prio, rank, e->cursor_prio, e->cursor_rank))
	{
		e->cursor_prio = prio;
		e->cursor_rank = rank;
	}
	e->gen++;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

/*
 * A claim passed over a job at (prio, rank) that another transaction was
 * changing.  If that was a claim, its rollback lowers the cursor; anyone
 * else (a user's FOR UPDATE, an UPDATE by hand, a queue.reschedule() that
 * failed) may leave the job ready behind the cursor, so QueueCursorGet
 * lowers the cursor to it after a while.
 */
void
QueueCursorSkipped(int32 qno, int32 prio, int64 rank, TimestampTz now)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	if (!e->skip_valid)
	{
		e->skip_valid = true;
		e->skip_prio = prio;
		e->skip_rank = rank;
		e->skip_at = now;
	}
	else if (key_before(prio, rank, e->skip_prio, e->skip_rank))
	{
		e->skip_prio = prio;
		e->skip_rank = rank;
	}
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

/*
 * A transaction that may have locked ready jobs it did not mean to ends
 * (see promote_due in ops/claim.c): the jobs claims passed over meanwhile are theirs
 * again now, not after SKIP_RECHECK_MS.
 */
void
QueueCursorUnskip(int32 qno)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	if (e->skip_valid)
		cursor_to_skipped(e);
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

void
QueueCursorReset(int32 qno)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	e->cursor_valid = false;
	e->gen++;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

/* A dropped queue's entry is removed, so that its slot can be reused. */
void
QueueStateForget(int32 qno)
{
	QueueSharedKey key = entry_key(qno);

	if (queue_shared_hash == NULL)
		return;
	LWLockAcquire(queue_shared_lock, LW_EXCLUSIVE);
	hash_search(queue_shared_hash, &key, HASH_REMOVE, NULL);
	LWLockRelease(queue_shared_lock);
}

/* Every queue of database dboid forgets its shared state. */
void
QueueStateForgetDatabase(Oid dboid)
{
	HASH_SEQ_STATUS status;
	QueueShared *e;

	if (queue_shared_hash == NULL)
		return;
	LWLockAcquire(queue_shared_lock, LW_EXCLUSIVE);
	hash_seq_init(&status, queue_shared_hash);
	while ((e = hash_seq_search(&status)) != NULL)
		if (e->key.dboid == dboid)
			hash_search(queue_shared_hash, &e->key, HASH_REMOVE, NULL);
	LWLockRelease(queue_shared_lock);
}

/*
 * Whether xact/leases.c has loaded queue qno's batch leases into shared memory:
 * 1 yes, 0 not yet, -1 the queue has no shared state (no batch leases).
 */
int
QueueLeasesLoaded(int32 qno)
{
	QueueShared *e = QueueEntryAcquire(qno);
	int			loaded;

	if (e == NULL)
		return -1;
	SpinLockAcquire(&e->mutex);
	loaded = e->leases_loaded ? 1 : 0;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return loaded;
}

void
QueueLeasesSetLoaded(int32 qno)
{
	QueueShared *e = QueueEntryAcquire(qno);

	if (e == NULL)
		return;
	SpinLockAcquire(&e->mutex);
	e->leases_loaded = true;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
}

/*
 * Whether a claim should look for scheduled jobs that came due.  With
 * shared memory, one claim per PROMOTE_INTERVAL_MS per queue does it, and
 * the first claim once the queue's due time has come: claims waiting for
 * it wake then, and so need not wait for the worker to promote the job and
 * commit before they take it.  Without shared memory, every claim does.
 */
bool
QueuePromoteDue(int32 qno, TimestampTz now_ts)
{
	QueueShared *e = QueueEntryAcquire(qno);
	bool		due;

	if (e == NULL)
		return true;
	SpinLockAcquire(&e->mutex);
	due = now_ts - e->promote_checked >= PROMOTE_INTERVAL_MS * INT64CONST(1000) ||
		(e->next_due != 0 && e->next_due != DT_NOEND &&
		 e->next_due <= now_ts && e->promote_checked < e->next_due);
	if (due)
		e->promote_checked = now_ts;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return due;
}

/*
 * Mark a queue as having listeners to wake, not before after (0: at once):
 * 1 if newly marked, 0 if it already was, -1 if the queue has no shared
 * entry.
 */
int
QueueMarkNotify(int32 qno, TimestampTz after)
{
	QueueShared *e = QueueEntryAcquire(qno);
	bool		was;

	if (e == NULL)
		return -1;
	SpinLockAcquire(&e->mutex);
	was = e->notify_pending;
	e->notify_pending = true;
	/* the latest claim's time for the next token; a commit's mark keeps it */
	if (after != 0)
		e->notify_after = after;
	SpinLockRelease(&e->mutex);
	if (!was)
	{
		SpinLockAcquire(&notify_marks->mutex);
		if (notify_marks->n == NOTIFY_MARKS)
		{
			notify_marks->n = 0;
			notify_marks->overflows++;
		}
		notify_marks->marks[notify_marks->n++] = e->key;
		SpinLockRelease(&notify_marks->mutex);
	}
	QueueEntryRelease();
	return was ? 0 : 1;
}

/*
 * When queue qno next needs upkeep (a scheduled job or a lease falls due).
 * Returns false if unknown.  gen is for QueueDueSet, as with the cursor:
 * QueueDueSet stores a due time computed from a snapshot taken after gen
 * was read, brought forward to what was noted since (QueueDueLower), and
 * says whether that changed it.  It stores nothing if it cannot tell what
 * was noted since: an unknown due time, or more than DUE_NOTED of them.
 * With raise_only it stores only a later time than the one it finds, or
 * over an unknown one: see QueueXactNextDue in xact/pending.c.
 */
bool
QueueDueGet(int32 qno, TimestampTz *due, uint64 *gen)
{
	/* not made: the worker asks for queues it listed, maybe dropped since */
	QueueShared *e = queue_shared_find(qno);
	bool		known;

	*gen = 0;
	if (e == NULL)
		return false;
	SpinLockAcquire(&e->mutex);
	known = e->next_due != 0;
	*due = e->next_due;
	*gen = e->due_gen;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return known;
}

bool
QueueDueSet(int32 qno, TimestampTz due, uint64 gen, bool raise_only)
{
	QueueShared *e = QueueEntryAcquire(qno);
	bool		changed = false;

	if (e == NULL)
		return false;
	SpinLockAcquire(&e->mutex);
	if (e->due_gen - gen <= DUE_NOTED)
	{
		/* what was noted since gen was read: ours may have missed it */
		for (uint64 g = gen + 1; g <= e->due_gen && due != 0; g++)
		{
			TimestampTz at = e->due_noted[g % DUE_NOTED];

			due = at == 0 ? 0 : Min(due, at);
		}
		if (due != 0 && e->next_due != due &&
			(!raise_only || e->next_due == 0 || due > e->next_due))
		{
			e->next_due = due;
			changed = true;
		}
	}
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return changed;
}

/*
 * Something of queue qno falls due at at (0: at an unknown time).  True if
 * that is now the queue's known due time.
 */
bool
QueueDueLower(int32 qno, TimestampTz at)
{
	QueueShared *e = QueueEntryAcquire(qno);
	bool		lowered;

	if (e == NULL)
		return false;
	SpinLockAcquire(&e->mutex);
	lowered = at == 0 || (e->next_due != 0 && at < e->next_due);
	if (lowered)
		e->next_due = at;
	e->due_gen++;
	e->due_noted[e->due_gen % DUE_NOTED] = at;
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return lowered && at != 0;
}

/*
 * A claim of queue qno returned fewer jobs than it asked for: its consumer
 * may now wait for a notification.  True if the queue's listeners are owed
 * one that was held back for want of such a claim (QueueCollectNotifications):
 * the worker must look again.
 */
bool
QueueMarkMayWait(int32 qno)
{
	QueueShared *e = QueueEntryAcquire(qno);
	bool		held = false;

	if (e == NULL)
		return false;
	SpinLockAcquire(&e->mutex);
	if (!e->may_wait)
	{
		e->may_wait = true;
		held = e->notify_pending;
	}
	SpinLockRelease(&e->mutex);
	QueueEntryRelease();
	return held;
}

/*
 * Take the marks of database dboid off the list; false if the list
 * overflowed since this process last looked (or it never looked), when
 * only a scan of the whole table finds every mark.
 */
static bool
take_marks(Oid dboid, List **qnos)
{
	static uint64 overflows_seen = PG_UINT64_MAX;
	bool		complete;
	int			kept = 0;
	int			taken = 0;
	int32		mine[NOTIFY_MARKS];

	/* (no allocation with the spinlock held) */
	SpinLockAcquire(&notify_marks->mutex);
	complete = notify_marks->overflows == overflows_seen;
	overflows_seen = notify_marks->overflows;
	for (int i = 0; i < notify_marks->n; i++)
	{
		if (notify_marks->marks[i].dboid == dboid)
			mine[taken++] = notify_marks->marks[i].qno;
		else
			notify_marks->marks[kept++] = notify_marks->marks[i];
	}
	notify_marks->n = kept;
	SpinLockRelease(&notify_marks->mutex);
	for (int i = 0; i < taken; i++)
		*qnos = lappend_int(*qnos, mine[i]);
	return complete;
}

/*
 * Whether entry e's mark is to be taken now, clearing it; if it is kept,
 * *due is when it falls due (see QueueCollectNotifications).  A mark is
 * never taken before its notify_after.  With the entry's spinlock held.
 */
static bool
take_mark(QueueShared *e, TimestampTz now_ts, int64 idle_us, TimestampTz *due)
{
	*due = 0;
	if (!e->notify_pending)
		return false;
	if (now_ts < e->notify_after)
	{
		*due = e->notify_after;
		return false;
	}
	if (e->may_wait || now_ts - e->notified_at >= idle_us)
	{
		e->notify_pending = false;
		e->may_wait = false;
		e->notified_at = now_ts;
		e->notify_after = 0;
		return true;
	}
	*due = e->notified_at + idle_us;
	return false;
}

/*
 * Queue numbers of a database marked for NOTIFY, clearing their marks.
 *
 * A consumer waits for a notification only after a claim that came back
 * short (it found the queue drained); one that is busy claims again
 * without waiting.  So a queue whose claims have all come back full since
 * its last NOTIFY has no consumer that needs another one, and its mark is
 * kept, not taken, until such a claim comes (QueueMarkMayWait wakes the
 * worker then) or until idle_us (queue.notify_busy_interval) have passed
 * since that NOTIFY, for listeners that never claim.  Under a stream of
 * commits with busy consumers, that is what keeps the worker from
 * signalling every listening backend hundreds of times a second for
 * nothing.  *retry_at is set to when the first mark kept falls due, or 0.
 *
 * The queues to look at are those marked since the last call (NotifyMarks)
 * and those whose marks it kept, which *kept lists (the caller keeps the
 * list between calls, NIL at first; it lives in TopMemoryContext).  A
 * process that has not called before, or whose marks may have been lost
 * to an overflow, looks at every queue of the database instead.
 */
List *
QueueCollectNotifications(Oid dboid, TimestampTz now_ts, int64 idle_us, List **kept,
						  TimestampTz *retry_at)
{
	List	   *look = NIL;
	List	   *result = NIL;
	List	   *still_kept = NIL;
	ListCell   *lc;
	MemoryContext old;

	*retry_at = 0;
	if (queue_shared_hash == NULL)
		return NIL;
	if (take_marks(dboid, &look))
		look = list_concat(look, *kept);
	else
	{
		HASH_SEQ_STATUS status;
		QueueShared *e;

		list_free(look);
		look = NIL;
		LWLockAcquire(queue_shared_lock, LW_SHARED);
		hash_seq_init(&status, queue_shared_hash);
		while ((e = hash_seq_search(&status)) != NULL)
			if (e->key.dboid == dboid)
				look = lappend_int(look, e->key.qno);
		LWLockRelease(queue_shared_lock);
	}

	LWLockAcquire(queue_shared_lock, LW_SHARED);
	foreach(lc, look)
	{
		QueueSharedKey key = {0};
		QueueShared *e;
		bool		take;
		TimestampTz due;

		key.dboid = dboid;
		key.qno = lfirst_int(lc);
		e = hash_search(queue_shared_hash, &key, HASH_FIND, NULL);
		if (e == NULL)
			continue;			/* dropped */
		SpinLockAcquire(&e->mutex);
		take = take_mark(e, now_ts, idle_us, &due);
		SpinLockRelease(&e->mutex);
		if (take)
			result = lappend_int(result, key.qno);
		else if (due != 0)
		{
			old = MemoryContextSwitchTo(TopMemoryContext);
			still_kept = lappend_int(still_kept, key.qno);
			MemoryContextSwitchTo(old);
			if (*retry_at == 0 || due < *retry_at)
				*retry_at = due;
		}
	}
	LWLockRelease(queue_shared_lock);
	list_free(look);
	list_free(*kept);
	*kept = still_kept;
	return result;
}
