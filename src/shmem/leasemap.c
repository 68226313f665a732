/*-------------------------------------------------------------------------
 *
 * leasemap.c
 *	  Shared memory segment "queue leases": the jobs under batch leases and
 *	  the leases themselves (xact/leases.c says what a batch lease is).
 *
 * Two hash tables keyed by (database, id): leased jobs (the lease each
 * belongs to, the row's attempt when leased, and where its row is, so that
 * complete goes straight to it instead of through the primary key) and
 * leases (the claiming transaction until it commits, how many jobs are
 * left, the times and the claimer).  They are sized by
 * queue.max_leased_jobs; room is reserved before entries are added
 * (LeaseMapReserve), so that a claim knows before it starts whether its
 * batch fits.
 *
 * Locking: the leased-jobs table has LEASE_PARTITIONS partitions, each
 * with an LWLock held for one lookup or change; the leases table has one
 * LWLock.  Above them, each queue has one of LEASE_QUEUE_LOCKS LWLocks
 * (LeaseMapQueueLock): claims hold it shared while they check a row and
 * take or lock it, batch claims hold it exclusively while they add their
 * entries, so that checking a row and taking it are one step against a
 * batch claim adding entries.  Three tranches, so that a wait on one
 * (pg_stat_activity.wait_event) says which.  The counters are atomics:
 * entries and room reserved in each table, and the jobs leased per queue
 * lock, which lets a queue without batch leases skip every lookup.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"

#include "base/jobid.h"
#include "base/settings.h"
#include "shmem/leasemap.h"

#define LEASE_PARTITIONS		16	/* of the leased-jobs table */
#define LEASE_QUEUE_LOCKS		64

typedef struct LeaseShared
{
	pg_atomic_uint32 njobs;		/* entries of lease_jobs, and room reserved */
	pg_atomic_uint32 nbatches;	/* the same for lease_batches */
	pg_atomic_uint32 leased[LEASE_QUEUE_LOCKS]; /* jobs leased, per queue lock */
} LeaseShared;

static LeaseShared *lease_shared = NULL;
static HTAB *lease_jobs = NULL;
static HTAB *lease_batches = NULL;
static LWLockPadded *partition_locks = NULL;
static LWLockPadded *batches_lock = NULL;
static LWLockPadded *queue_locks = NULL;

#define PARTITION_LOCK(h)	(&partition_locks[(h) % LEASE_PARTITIONS].lock)
#define BATCHES_LOCK		(&batches_lock->lock)
#define QUEUE_SLOT(db, qno)	(hash_combine((db), (uint32) (qno)) % LEASE_QUEUE_LOCKS)
#define MY_QUEUE_SLOT(qno)	QUEUE_SLOT(MyDatabaseId, qno)

static int
max_batches(void)
{
	return Max(queue_max_leased_jobs / 4, 16);
}

Size
LeaseMapShmemSize(void)
{
	Size		size = MAXALIGN(sizeof(LeaseShared));

	if (queue_max_leased_jobs == 0)
		return size;
	size = add_size(size, hash_estimate_size(queue_max_leased_jobs, sizeof(LeasedJob)));
	return add_size(size, hash_estimate_size(max_batches(), sizeof(LeaseBatch)));
}

void
LeaseMapRequestLocks(void)
{
	RequestNamedLWLockTranche("queue leased jobs", LEASE_PARTITIONS);
	RequestNamedLWLockTranche("queue lease batches", 1);
	RequestNamedLWLockTranche("queue leases", LEASE_QUEUE_LOCKS);
}

/* At shared memory startup, with AddinShmemInitLock held. */
void
LeaseMapShmemInit(void)
{
	HASHCTL		info;
	bool		found;

	lease_shared = ShmemInitStruct("queue leases", sizeof(LeaseShared), &found);
	if (!found)
	{
		pg_atomic_init_u32(&lease_shared->njobs, 0);
		pg_atomic_init_u32(&lease_shared->nbatches, 0);
		for (int i = 0; i < LEASE_QUEUE_LOCKS; i++)
			pg_atomic_init_u32(&lease_shared->leased[i], 0);
	}
	partition_locks = GetNamedLWLockTranche("queue leased jobs");
	batches_lock = GetNamedLWLockTranche("queue lease batches");
	queue_locks = GetNamedLWLockTranche("queue leases");
	if (queue_max_leased_jobs == 0)
		return;

	info.keysize = sizeof(LeaseKey);
	info.entrysize = sizeof(LeasedJob);
	info.num_partitions = LEASE_PARTITIONS;
	lease_jobs = ShmemInitHash("queue leased jobs", queue_max_leased_jobs, queue_max_leased_jobs,
							   &info, HASH_ELEM | HASH_BLOBS | HASH_PARTITION);
	info.entrysize = sizeof(LeaseBatch);
	lease_batches = ShmemInitHash("queue lease batches", max_batches(), max_batches(),
								  &info, HASH_ELEM | HASH_BLOBS);
}

/* Whether batch leases can be kept: preloaded, with queue.max_leased_jobs > 0. */
bool
LeaseMapActive(void)
{
	return lease_jobs != NULL;
}

static inline LeaseKey
lease_key(int64 id)
{
	LeaseKey	key;

	key.dboid = MyDatabaseId;
	key.zero = 0;
	key.id = id;
	return key;
}

static bool
reserve(pg_atomic_uint32 *count, int n, int max)
{
	if (pg_atomic_add_fetch_u32(count, n) <= (uint32) max)
		return true;
	pg_atomic_fetch_sub_u32(count, n);
	return false;
}

/* Reserve room for njobs more job entries and nbatches leases: all or none. */
bool
LeaseMapReserve(int njobs, int nbatches)
{
	if (!reserve(&lease_shared->njobs, njobs, queue_max_leased_jobs))
		return false;
	if (!reserve(&lease_shared->nbatches, nbatches, max_batches()))
	{
		pg_atomic_fetch_sub_u32(&lease_shared->njobs, njobs);
		return false;
	}
	return true;
}

/* Give back room reserved and not used. */
void
LeaseMapUnreserve(int njobs, int nbatches)
{
	if (njobs > 0)
		pg_atomic_fetch_sub_u32(&lease_shared->njobs, njobs);
	if (nbatches > 0)
		pg_atomic_fetch_sub_u32(&lease_shared->nbatches, nbatches);
}

/* The LWLock that makes checking a row of queue qno and taking it one step. */
LWLock *
LeaseMapQueueLock(int32 qno)
{
	return &queue_locks[MY_QUEUE_SLOT(qno)].lock;
}

/* Whether queue qno (or one sharing its lock) may have leased jobs. */
bool
LeaseMapQueueHasLeases(int32 qno)
{
	return lease_jobs != NULL && pg_atomic_read_u32(&lease_shared->leased[MY_QUEUE_SLOT(qno)]) > 0;
}

/* Whether job id has an entry; if so, and copy is given, a copy of it. */
bool
LeaseMapFindJob(int64 id, LeasedJob *copy)
{
	LeaseKey	key = lease_key(id);
	uint32		h = get_hash_value(lease_jobs, &key);
	LWLock	   *lock = PARTITION_LOCK(h);
	LeasedJob  *e;

	LWLockAcquire(lock, LW_SHARED);
	e = hash_search_with_hash_value(lease_jobs, &key, h, HASH_FIND, NULL);
	if (e != NULL && copy != NULL)
		*copy = *e;
	LWLockRelease(lock);
	return e != NULL;
}

/*
 * Whether the ready row of job id (of queue qno) at attempt is under a
 * batch lease: its entry lists that attempt.  An entry of another attempt
 * is left by a lease the row has left since (its entry goes when the
 * transaction that wrote the row commits); *any tells whether there is an
 * entry at all.  The caller holds LeaseMapQueueLock(qno), shared at least.
 */
bool
LeaseMapIsLeased(int32 qno, int64 id, int32 attempt, bool *any)
{
	LeasedJob	e;

	*any = false;
	if (!LeaseMapQueueHasLeases(qno) || !LeaseMapFindJob(id, &e))
		return false;
	*any = true;
	return e.attempt == attempt;
}

/*
 * Add job id's entry, in room reserved before; false if it has one
 * already.
 */
bool
LeaseMapAddJob(int64 id, int64 lease, int32 attempt, const ItemPointerData *tid)
{
	LeaseKey	key = lease_key(id);
	uint32		h = get_hash_value(lease_jobs, &key);
	LWLock	   *lock = PARTITION_LOCK(h);
	LeasedJob  *e;
	bool		found;

	LWLockAcquire(lock, LW_EXCLUSIVE);
	e = hash_search_with_hash_value(lease_jobs, &key, h, HASH_ENTER_NULL, &found);
	if (e != NULL && !found)
	{
		e->lease = lease;
		e->attempt = attempt;
		if (tid != NULL)
			e->tid = *tid;
		else
			ItemPointerSetInvalid(&e->tid);
	}
	LWLockRelease(lock);
	if (e == NULL || found)
		return false;
	pg_atomic_fetch_add_u32(&lease_shared->leased[MY_QUEUE_SLOT(JobIdQueue(id))], 1);
	return true;
}

/* Remove job id's entry if it belongs to lease; returns whether it did. */
bool
LeaseMapRemoveJob(int64 id, int64 lease)
{
	LeaseKey	key = lease_key(id);
	uint32		h = get_hash_value(lease_jobs, &key);
	LWLock	   *lock = PARTITION_LOCK(h);
	LeasedJob  *e;
	bool		removed = false;

	LWLockAcquire(lock, LW_EXCLUSIVE);
	e = hash_search_with_hash_value(lease_jobs, &key, h, HASH_FIND, NULL);
	if (e != NULL && e->lease == lease)
	{
		hash_search_with_hash_value(lease_jobs, &key, h, HASH_REMOVE, NULL);
		removed = true;
	}
	LWLockRelease(lock);
	if (removed)
	{
		pg_atomic_fetch_sub_u32(&lease_shared->njobs, 1);
		pg_atomic_fetch_sub_u32(&lease_shared->leased[MY_QUEUE_SLOT(JobIdQueue(id))], 1);
	}
	return removed;
}

bool
LeaseMapGetBatch(int64 lease, LeaseBatch *copy)
{
	LeaseKey	key = lease_key(lease);
	LeaseBatch *b;

	LWLockAcquire(BATCHES_LOCK, LW_SHARED);
	b = hash_search(lease_batches, &key, HASH_FIND, NULL);
	if (b != NULL)
		*copy = *b;
	LWLockRelease(BATCHES_LOCK);
	return b != NULL;
}

/*
 * Store the entry of lease batch->key.id, in room reserved before: over an
 * existing one only with replace.  Returns whether one existed.
 */
bool
LeaseMapPutBatch(const LeaseBatch *batch, bool replace)
{
	LeaseKey	key = lease_key(batch->key.id);
	LeaseBatch *b;
	bool		found;

	LWLockAcquire(BATCHES_LOCK, LW_EXCLUSIVE);
	b = hash_search(lease_batches, &key, HASH_ENTER, &found);
	if (!found || replace)
	{
		*b = *batch;
		b->key = key;
	}
	LWLockRelease(BATCHES_LOCK);
	return found;
}

/* The claim that took the lease committed. */
void
LeaseMapBatchCommitted(int64 lease)
{
	LeaseKey	key = lease_key(lease);
	LeaseBatch *b;

	LWLockAcquire(BATCHES_LOCK, LW_EXCLUSIVE);
	b = hash_search(lease_batches, &key, HASH_FIND, NULL);
	if (b != NULL)
		b->xid = InvalidTransactionId;
	LWLockRelease(BATCHES_LOCK);
}

/*
 * The lease's jobs not finished went up (or down) by n; returns how many
 * are left (-1 if the lease has no entry).
 */
int
LeaseMapBatchAdd(int64 lease, int n)
{
	LeaseKey	key = lease_key(lease);
	LeaseBatch *b;
	int			left = -1;

	LWLockAcquire(BATCHES_LOCK, LW_EXCLUSIVE);
	b = hash_search(lease_batches, &key, HASH_FIND, NULL);
	if (b != NULL)
		left = b->remaining += n;
	LWLockRelease(BATCHES_LOCK);
	return left;
}

void
LeaseMapRemoveBatch(int64 lease)
{
	LeaseKey	key = lease_key(lease);
	bool		found;

	LWLockAcquire(BATCHES_LOCK, LW_EXCLUSIVE);
	hash_search(lease_batches, &key, HASH_REMOVE, &found);
	LWLockRelease(BATCHES_LOCK);
	if (found)
		pg_atomic_fetch_sub_u32(&lease_shared->nbatches, 1);
}

/*
 * Remove the entries of queue qno of database dboid (every queue's, with
 * qno 0): its queue or database was dropped, or a new queue took the
 * number of one dropped with its extension.
 */
void
LeaseMapForget(Oid dboid, int32 qno)
{
	HASH_SEQ_STATUS status;
	LeasedJob  *e;
	LeaseBatch *b;
	int			removed = 0;

	if (lease_jobs == NULL)
		return;
	for (int i = 0; i < LEASE_PARTITIONS; i++)
		LWLockAcquire(&partition_locks[i].lock, LW_EXCLUSIVE);
	hash_seq_init(&status, lease_jobs);
	while ((e = hash_seq_search(&status)) != NULL)
		if (e->key.dboid == dboid && (qno == 0 || JobIdQueue(e->key.id) == qno))
		{
			pg_atomic_fetch_sub_u32(&lease_shared->leased[QUEUE_SLOT(dboid, JobIdQueue(e->key.id))], 1);
			hash_search(lease_jobs, &e->key, HASH_REMOVE, NULL);
			removed++;
		}
	for (int i = LEASE_PARTITIONS - 1; i >= 0; i--)
		LWLockRelease(&partition_locks[i].lock);
	pg_atomic_fetch_sub_u32(&lease_shared->njobs, removed);

	removed = 0;
	LWLockAcquire(BATCHES_LOCK, LW_EXCLUSIVE);
	hash_seq_init(&status, lease_batches);
	while ((b = hash_seq_search(&status)) != NULL)
		if (b->key.dboid == dboid && (qno == 0 || JobIdQueue(b->key.id) == qno))
		{
			hash_search(lease_batches, &b->key, HASH_REMOVE, NULL);
			removed++;
		}
	LWLockRelease(BATCHES_LOCK);
	pg_atomic_fetch_sub_u32(&lease_shared->nbatches, removed);
}

/*
 * When the first batch lease of queue qno runs out, or 0 if it has none:
 * for when the queue falls due next (ops/claim.c), which claimers could
 * not read from the lease table.
 */
TimestampTz
LeaseMapNextExpiry(int32 qno)
{
	HASH_SEQ_STATUS status;
	LeaseBatch *b;
	TimestampTz first = 0;

	if (!LeaseMapQueueHasLeases(qno))
		return 0;
	LWLockAcquire(BATCHES_LOCK, LW_SHARED);
	hash_seq_init(&status, lease_batches);
	while ((b = hash_seq_search(&status)) != NULL)
		if (b->key.dboid == MyDatabaseId && JobIdQueue(b->key.id) == qno &&
			(first == 0 || b->lease_until < first))
			first = b->lease_until;
	LWLockRelease(BATCHES_LOCK);
	return first;
}

/*
 * The committed leases of queue qno all of whose jobs finished (their rows
 * stay for the worker to delete: xact/leases.c); returns how many, in
 * *leases (palloc'd).
 */
int
LeaseMapEnded(int32 qno, int64 **leases)
{
	HASH_SEQ_STATUS status;
	LeaseBatch *b;
	int			n = 0;
	int			cap = 16;

	*leases = palloc(sizeof(int64) * cap);
	if (lease_batches == NULL)
		return 0;
	LWLockAcquire(BATCHES_LOCK, LW_SHARED);
	hash_seq_init(&status, lease_batches);
	while ((b = hash_seq_search(&status)) != NULL)
	{
		if (b->key.dboid != MyDatabaseId || JobIdQueue(b->key.id) != qno ||
			b->remaining > 0 || TransactionIdIsValid(b->xid))
			continue;
		if (n == cap)
		{
			cap *= 2;
			*leases = repalloc(*leases, sizeof(int64) * cap);
		}
		(*leases)[n++] = b->key.id;
	}
	LWLockRelease(BATCHES_LOCK);
	return n;
}
