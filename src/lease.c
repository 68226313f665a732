/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  One lease for a whole batch: what a claim of many jobs in a
 *	  transaction of its own records instead of rewriting every row.
 *
 * A leased claim used to update each job it took to 'running': a new row
 * version, its primary key and lease index entries, all of it WAL, and
 * later a lookup by id to delete it.  That was most of the cost of the
 * leased way of consuming, and what kept it behind PgQ, whose unit of
 * work is the batch.  Here such a claim only locks each row (which undoes
 * itself at commit), notes the jobs in shared memory, and inserts one row
 * into the queue's lease table, queue.l_<name>, naming them all.  The job
 * rows stay 'ready', and unchanged, until the jobs finish.
 *
 * What is true on disk: a job is running under a batch lease when its row
 * is 'ready' at the attempt a lease row lists for it.  Whatever writes the
 * row ends the lease for that job: complete deletes it, fail, extend and
 * release first write it as the running row a claim of its own would have
 * left ("materialize"), and the worker returns the jobs of an expired or
 * orphaned lease.  A lease row itself is written only when the whole lease
 * ends (its last job finishes, or the worker returns it), and after the
 * rows of its jobs: the worker, which finds leases by their rows and so
 * locks those first, never waits for a row.  The views read it that way.
 *
 * What shared memory adds is speed and a guard.  Two hash tables keyed by
 * (database, id): leased jobs (the lease they belong to, and where their
 * row is, so that complete goes straight to it instead of through the
 * primary key) and leases (the claiming transaction until it commits, how
 * many jobs are left, the times).  A claim that finds a ready row must not
 * take it if it is leased, and nothing on the row says so: so every claim
 * checks the table, and the check and the taking must be one step against
 * a batch claim adding entries.  Each queue has one of LEASE_QUEUE_LOCKS
 * LWLocks: claims hold it shared while they check a row and take or lock
 * it, batch claims hold it exclusively while they add their entries.  A
 * batch claim locks each row before it adds its entry, and keeps the lock
 * until it commits, so a claim that looked before the entry was there
 * could only have taken the row before the lock, which the lock then
 * refuses.  After a restart the entries are gone: the first claim on a
 * queue loads them from its lease rows (whose owners are all gone, so the
 * worker returns them soon after).
 *
 * Entries of a transaction are added when it takes the jobs and made
 * final when it commits; it removes them at commit when its jobs finish,
 * and at abort when the claim is undone.  The commit callback runs before
 * xact.c's, which lowers the claim cursor: a job whose lease the worker
 * ended is never skipped after the cursor has come back to it.
 *
 * Management functions that act on ready rows (queue.purge) take the
 * queue's lease lock exclusively (a heavyweight lock, until they commit),
 * which waits for batch claims in flight and keeps new ones from
 * starting: they then go per row.  A single job is checked after its row
 * is locked (queue._leased).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "port/atomics.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "queue.h"

#define LEASE_PARTITIONS		16	/* of the leased-jobs table */
#define LEASE_QUEUE_LOCKS		64
#define LEASE_LOCKTAG_FIELD4	8	/* groups.c uses 7, users' advisory locks 1 and 2 */

int			queue_max_leased_jobs = 65536;

typedef struct LeaseKey
{
	Oid			dboid;
	uint32		zero;			/* no padding: the whole key is hashed */
	int64		id;				/* a job's id, or a lease's */
} LeaseKey;

typedef struct LeasedJob
{
	LeaseKey	key;
	int64		lease;
	int32		attempt;		/* the row's attempt when leased (one less than the lease's) */
	ItemPointerData tid;		/* the job's row; invalid if not known */
} LeasedJob;

typedef struct LeaseBatch
{
	LeaseKey	key;
	TransactionId xid;			/* the claim's until it commits, then invalid */
	int32		remaining;		/* its jobs not finished by committed work */
	TimestampTz claimed_at;
	TimestampTz lease_until;
	int32		owner_pid;		/* the claimer's session */
	TimestampTz owner_start;
} LeaseBatch;

typedef struct LeaseShared
{
	pg_atomic_uint32 njobs;		/* entries of lease_jobs, and room reserved */
	pg_atomic_uint32 nbatches;	/* the same for lease_batches */
	pg_atomic_uint32 leased[LEASE_QUEUE_LOCKS]; /* jobs leased, per queue lock */
} LeaseShared;

static LeaseShared *lease_shared = NULL;
static HTAB *lease_jobs = NULL;
static HTAB *lease_batches = NULL;

/*
 * Three tranches, so that a wait on one (pg_stat_activity.wait_event) says
 * which: partitions of lease_jobs, the lock of lease_batches, the queue locks
 */
static LWLockPadded *partition_locks = NULL;
static LWLockPadded *batches_lock = NULL;
static LWLockPadded *queue_locks = NULL;

#define PARTITION_LOCK(h)	(&partition_locks[(h) % LEASE_PARTITIONS].lock)
#define BATCHES_LOCK		(&batches_lock->lock)
#define QUEUE_LOCK_NO(qno)	QUEUE_SLOT(MyDatabaseId, qno)
#define QUEUE_SLOT(db, qno)	(hash_combine((db), (uint32) (qno)) % LEASE_QUEUE_LOCKS)
#define QUEUE_LOCK(slot)	(&queue_locks[(slot)].lock)

static int
max_batches(void)
{
	return Max(queue_max_leased_jobs / 4, 16);
}

Size
QueueLeaseShmemSize(void)
{
	Size		size = MAXALIGN(sizeof(LeaseShared));

	if (queue_max_leased_jobs == 0)
		return size;
	size = add_size(size, hash_estimate_size(queue_max_leased_jobs, sizeof(LeasedJob)));
	return add_size(size, hash_estimate_size(max_batches(), sizeof(LeaseBatch)));
}

/* Called from the shmem request hook. */
void
QueueLeaseRequestLocks(void)
{
	RequestNamedLWLockTranche("queue leased jobs", LEASE_PARTITIONS);
	RequestNamedLWLockTranche("queue lease batches", 1);
	RequestNamedLWLockTranche("queue leases", LEASE_QUEUE_LOCKS);
}

/* Called at shared memory startup, with AddinShmemInitLock held. */
void
QueueLeaseShmemInit(void)
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

static inline LeaseKey
lease_key(int64 id)
{
	LeaseKey	key;

	key.dboid = MyDatabaseId;
	key.zero = 0;
	key.id = id;
	return key;
}

static inline int32
qno_of(int64 id)
{
	return (int32) (id % QUEUE_ID_FACTOR);
}

/* ---------------------------------------------------------------- entries */

/* Whether job id has an entry; if so, and copy is given, a copy of it. */
static bool
job_find(int64 id, LeasedJob *copy)
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

static bool
job_insert(int64 id, int64 lease, int32 attempt, const ItemPointerData *tid)
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
	return e != NULL && !found;
}

/* Remove job id's entry if it belongs to lease; returns whether it did. */
static bool
job_remove(int64 id, int64 lease)
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
		pg_atomic_fetch_sub_u32(&lease_shared->leased[QUEUE_LOCK_NO(qno_of(id))], 1);
	}
	return removed;
}

static bool
batch_get(int64 lease, LeaseBatch *copy)
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

static void
batch_remove(int64 lease)
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
 * The lease's jobs not finished went up (or down) by n; returns how many
 * are left (-1 if the lease has no entry).
 */
static int
batch_add(int64 lease, int n)
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

/* Reserve room for n more entries in a table of at most max; all or none. */
static bool
reserve(pg_atomic_uint32 *count, int n, int max)
{
	if (pg_atomic_add_fetch_u32(count, n) <= (uint32) max)
		return true;
	pg_atomic_fetch_sub_u32(count, n);
	return false;
}

/* ---------------------------------------------------------------- loading */

/*
 * The heavyweight lock of queue qno's leases: batch claims and the worker
 * take it shared (without waiting), what must see the leases hold still
 * (queue.purge, loading them after a restart) exclusively.
 */
static bool
lock_leases(int32 qno, LOCKMODE mode, bool wait)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) qno, 0, LEASE_LOCKTAG_FIELD4);
	return LockAcquire(&tag, mode, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

static void
unlock_leases(int32 qno, LOCKMODE mode)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) qno, 0, LEASE_LOCKTAG_FIELD4);
	LockRelease(&tag, mode, false);
}

/* The queue's lease table; InvalidOid if it has none. */
static Oid
lease_relid(QueueInfo *q)
{
	char		tname[NAMEDATALEN + 4];

	snprintf(tname, sizeof(tname), "l_%s", q->name);
	return get_relname_relid(tname, get_namespace_oid("queue", false));
}

/*
 * Run one of the lease table's fixed statements (PLAN_LEASE_*) as the
 * table's owner.  The lease table is the queue's own bookkeeping: a role
 * that may claim and finish jobs need not be able to write it, as it need
 * not be able to read the claim cursor.  Returns SPI's result.
 */
static int
lease_statement(QueueInfo *q, QueuePlanId which, Datum *args, long count)
{
	Oid			relid = lease_relid(q);
	QueueAsRole as;
	int			ret;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("lease table of queue \"%s\" is missing", q->name),
				 errhint("The queue's objects were changed by hand; drop and re-create the queue.")));
	QueueAsRoleBegin(&as, QueueRelOwner(relid, q->name));
	ret = SPI_execute_plan(QueueGetPlan(q, which), args, NULL, false, count);
	QueueAsRoleEnd(&as);
	return ret;
}

/* Run sql (with at most one bigint[] argument) on the latest snapshot. */
static int
execute_latest(const char *sql, Datum *arg, bool read_only, long count)
{
	Oid			argtype = INT8ARRAYOID;
	SPIPlanPtr	plan = SPI_prepare(sql, arg != NULL ? 1 : 0, &argtype);
	int			ret;

	/* (a failure's code goes to the caller's queue_spi_check) */
	if (plan == NULL)
		return SPI_result;
	ret = QueueExecuteLatest(plan, arg, read_only, count);
	SPI_freeplan(plan);
	return ret;
}

/*
 * Make shared memory know q's leases: after a restart, the first backend
 * to look at the queue reads its lease rows into the tables.  Leases a
 * claim took since are in them already, so this happens once per queue
 * and server start.  Must be called inside QueueSpiBegin.
 */
static void
load_leases(QueueInfo *q)
{
	Oid			relid = lease_relid(q);
	QueueAsRole as;
	int			ret;
	uint64		nrows;
	int			nbatches = 0;
	int32		slot = QUEUE_LOCK_NO(q->qno);

	lock_leases(q->qno, ExclusiveLock, true);
	if (QueueLeasesLoaded(q->qno) != 0 || !OidIsValid(relid))
	{
		unlock_leases(q->qno, ExclusiveLock);
		if (!OidIsValid(relid))
			QueueLeasesSetLoaded(q->qno);
		return;
	}

	/*
	 * As the table's owner: a consumer may claim without reading it.  Only
	 * the jobs a lease still holds: ready, at the attempt it lists.
	 */
	QueueAsRoleBegin(&as, QueueRelOwner(relid, q->name));
	ret = execute_latest(psprintf("SELECT l.lease, l.claimed_at, l.lease_until, u.id, u.attempt,"
								  " l.owner_pid, l.owner_start"
								  " FROM %s l, unnest(l.ids, l.attempts) AS u(id, attempt), %s j"
								  " WHERE j.id = u.id AND j.state = 'ready' AND j.attempt = u.attempt"
								  " ORDER BY l.lease",
								  quote_qualified_identifier("queue", get_rel_name(relid)),
								  quote_qualified_identifier("queue", psprintf("q_%s", q->name))),
						 NULL, true, 0);
	QueueAsRoleEnd(&as);
	queue_spi_check(ret, SPI_OK_SELECT, -1, "read the leases", q->name);
	nrows = SPI_processed;
	for (uint64 i = 0; i < nrows; i++)
	{
		bool		isnull;

		if (i == 0 || SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull) !=
			SPI_getbinval(SPI_tuptable->vals[i - 1], SPI_tuptable->tupdesc, 1, &isnull))
			nbatches++;
	}
	if (!reserve(&lease_shared->njobs, (int) nrows, queue_max_leased_jobs))
		nbatches = -1;
	else if (!reserve(&lease_shared->nbatches, nbatches, max_batches()))
	{
		pg_atomic_fetch_sub_u32(&lease_shared->njobs, (int) nrows);
		nbatches = -1;
	}
	if (nbatches < 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("queue \"%s\" has more leased jobs than shared memory can track", q->name),
				 errdetail("Its lease table holds " UINT64_FORMAT " jobs, left from before the server started.",
						   nrows),
				 errhint("Wait for the background worker to return them, or raise queue.max_leased_jobs.")));

	LWLockAcquire(QUEUE_LOCK(slot), LW_EXCLUSIVE);
	for (uint64 i = 0; i < nrows; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		lease = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		int64		id = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
		LeaseKey	key = lease_key(lease);
		LeaseBatch *b;
		bool		found;

		LWLockAcquire(BATCHES_LOCK, LW_EXCLUSIVE);
		b = hash_search(lease_batches, &key, HASH_ENTER, &found);
		if (!found)
		{
			b->xid = InvalidTransactionId;
			b->remaining = 0;
			b->claimed_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 2, &isnull));
			b->lease_until = DatumGetTimestampTz(SPI_getbinval(tup, desc, 3, &isnull));
			b->owner_pid = DatumGetInt32(SPI_getbinval(tup, desc, 6, &isnull));
			if (isnull)
				b->owner_pid = 0;
			b->owner_start = DatumGetTimestampTz(SPI_getbinval(tup, desc, 7, &isnull));
			if (isnull)
				b->owner_start = 0;
		}
		LWLockRelease(BATCHES_LOCK);
		/* (what another queue's row or a second lease lists is not ours) */
		if (qno_of(id) == q->qno &&
			job_insert(id, lease, DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull)), NULL))
		{
			pg_atomic_fetch_add_u32(&lease_shared->leased[slot], 1);
			(void) batch_add(lease, 1);
		}
		else
			pg_atomic_fetch_sub_u32(&lease_shared->njobs, 1);
	}
	QueueLeasesSetLoaded(q->qno);
	LWLockRelease(QUEUE_LOCK(slot));
	unlock_leases(q->qno, ExclusiveLock);
}

/*
 * Whether shared memory tracks q's batch leases (loading them if need
 * be): claims must then check each row they would take.  Without shared
 * memory, or for a queue beyond queue.max_queues, nothing takes batch
 * leases.  Must be called inside QueueSpiBegin.
 */
bool
QueueLeaseTracking(QueueInfo *q)
{
	int			state;

	/* a standby takes no leases, and must not load what replay changes */
	if (lease_jobs == NULL || RecoveryInProgress())
		return false;
	state = QueueLeasesLoaded(q->qno);
	if (state < 0)
		return false;
	if (state == 0)
		load_leases(q);
	return true;
}

/* ---------------------------------------------------------------- claims */

/*
 * What the transaction's own lease work must do when it ends.  CLAIMED: a
 * batch claim added entries (made final at commit, removed at abort, and
 * room it reserved but did not use given back either way).  DONE: a job
 * left its lease (completed, or written as a running row); DROPPED: a
 * whole lease ended (the worker, queue._settle_leases).  Both of those
 * remove entries at commit.
 */
typedef enum LeaseActionKind
{
	LA_CLAIMED,
	LA_DONE,
	LA_DROPPED,
	LA_FORGET_DB
} LeaseActionKind;

typedef struct LeaseAction
{
	LeaseActionKind kind;
	int			nest;
	int32		qno;
	int64		lease;
	bool		batch_gone;		/* DONE, DROPPED: the lease row was deleted too */
	bool		emptied;		/* DONE, DROPPED: at commit, left no job in the lease */
	int			reserved;		/* CLAIMED: room reserved for jobs, unused */
	bool		batch_reserved; /* CLAIMED: ... and for the batch entry */
	bool		batch_made;		/* CLAIMED: its batch entry exists */
	int			n;				/* ids */
	int			cap;
	int64	   *ids;
} LeaseAction;

static List *actions = NIL;

/*
 * Jobs this transaction took off their leases (completed, written as
 * running rows, or returned): their entries go only at commit, but to
 * this transaction they are no longer leased.  Keyed by id; the value is
 * the nesting level that did it.
 */
typedef struct LeftJob
{
	int64		id;
	int			nest;
} LeftJob;

static HTAB *left_jobs = NULL;

static void
note_left(int64 id)
{
	LeftJob    *e;
	bool		found;

	if (left_jobs == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(int64);
		ctl.entrysize = sizeof(LeftJob);
		ctl.hcxt = TopTransactionContext;
		left_jobs = hash_create("queue jobs off their leases", 64, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	e = hash_search(left_jobs, &id, HASH_ENTER, &found);
	if (!found)
		e->nest = GetCurrentTransactionNestLevel();
}

static bool
has_left(int64 id)
{
	return left_jobs != NULL && hash_search(left_jobs, &id, HASH_FIND, NULL) != NULL;
}

static LeaseAction *
new_action(LeaseActionKind kind, int32 qno, int64 lease, int cap)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	LeaseAction *a = palloc0(sizeof(LeaseAction));

	a->kind = kind;
	a->nest = GetCurrentTransactionNestLevel();
	a->qno = qno;
	a->lease = lease;
	a->cap = Max(cap, 1);
	a->ids = palloc(sizeof(int64) * a->cap);
	actions = lappend(actions, a);
	MemoryContextSwitchTo(old);
	return a;
}

static void
action_add_id(LeaseAction *a, int64 id)
{
	if (a->n == a->cap)
	{
		a->cap *= 2;
		a->ids = repalloc(a->ids, sizeof(int64) * a->cap);
	}
	a->ids[a->n++] = id;
}

/*
 * Set up a batch claim of up to want jobs of q, leased until lease_until:
 * lc->on tells whether the claim takes a lease for the batch.  It does in
 * a transaction of its own, for more than one job, when shared memory
 * tracks the queue's leases and has room, the role may draw from the
 * queue's sequence, and nothing holds the queue's leases still.
 * Otherwise the claim marks each job running, as before.  Must be called
 * inside QueueSpiBegin.
 */
void
QueueLeaseClaimBegin(QueueLeaseClaim *lc, QueueInfo *q, int want, TimestampTz claimed_at,
					 TimestampTz lease_until)
{
	LeaseAction *a;
	Oid			relid;

	memset(lc, 0, sizeof(*lc));
	lc->q = q;
	lc->claimed_at = claimed_at;
	lc->lease_until = lease_until;
	lc->track = QueueLeaseTracking(q);
	if (!lc->track || want < 2 || IsTransactionBlock() || IsolationIsSerializable() ||
		q->max_running > 0)
		return;
	/*
	 * The lease's id is drawn from the queue's sequence, as a job's is.
	 * Upkeep runs as the owner of the job table, and must be able to end
	 * the lease: a lease table given to someone else by hand takes none.
	 */
	relid = lease_relid(q);
	if (!OidIsValid(relid) ||
		pg_class_aclcheck(QueueSeqRelid(q), GetUserId(), ACL_USAGE | ACL_UPDATE) != ACLCHECK_OK ||
		QueueRelOwner(relid, q->name) != QueueRelOwner(QueueTableRelid(q), q->name))
		return;
	if (!lock_leases(q->qno, ShareLock, false))
		return;
	/*
	 * A queue.alter() that gave the queue max_running (and ended its
	 * leases) may have committed since our copy of its settings was read:
	 * if anything changed, claim without a batch lease this time.
	 */
	AcceptInvalidationMessages();
	if (QueueCacheStale())
		return;
	if (!reserve(&lease_shared->njobs, want, queue_max_leased_jobs))
		return;
	if (!reserve(&lease_shared->nbatches, 1, max_batches()))
	{
		pg_atomic_fetch_sub_u32(&lease_shared->njobs, want);
		return;
	}
	a = new_action(LA_CLAIMED, q->qno, 0, want);
	lc->tids = palloc(sizeof(ItemPointerData) * want);
	lc->attempts = palloc(sizeof(int32) * want);
	a->reserved = want;
	a->batch_reserved = true;
	lc->action = a;
	lc->on = true;
}

/* The LWLock that makes checking a row and taking it one step. */
LWLock *
QueueLeaseLock(int32 qno)
{
	return QUEUE_LOCK(QUEUE_LOCK_NO(qno));
}

/*
 * Whether job id (of queue qno) is leased, or being leased by a claim in
 * flight.  The caller holds QueueLeaseLock(qno), shared at least.
 */
bool
QueueLeaseHeldLocked(int32 qno, int64 id)
{
	if (pg_atomic_read_u32(&lease_shared->leased[QUEUE_LOCK_NO(qno)]) == 0)
		return false;
	return job_find(id, NULL) && !has_left(id);
}

/*
 * The claim locked job id's row, at tid and with attempt: it is part of
 * the batch.
 */
void
QueueLeaseStage(QueueLeaseClaim *lc, int64 id, const ItemPointerData *tid, int32 attempt)
{
	LeaseAction *a = (LeaseAction *) lc->action;

	Assert(lc->on && a->n - lc->flushed < a->reserved);
	if (a->lease == 0)
		a->lease = QueueNextSeq(lc->q) * QUEUE_ID_FACTOR + lc->q->qno;
	lc->tids[a->n] = *tid;
	lc->attempts[a->n] = attempt;
	action_add_id(a, id);
}

/*
 * Whether the batch can take job id: it has room, and the job did not
 * just leave a lease in this transaction (whose entry goes only at
 * commit: such a job is marked running instead).
 */
bool
QueueLeaseMayBatch(QueueLeaseClaim *lc, int64 id)
{
	LeaseAction *a = (LeaseAction *) lc->action;

	return lc->on && a->n - lc->flushed < a->reserved && !has_left(id);
}

/*
 * Add the entries of the jobs staged since the last flush, so that other
 * claims pass over them: done under the queue's lock, exclusively.
 */
void
QueueLeaseFlush(QueueLeaseClaim *lc)
{
	LeaseAction *a = (LeaseAction *) lc->action;
	int			n = a != NULL ? a->n - lc->flushed : 0;
	int32		slot;

	if (!lc->on || n == 0)
		return;
	slot = QUEUE_LOCK_NO(lc->q->qno);
	LWLockAcquire(QUEUE_LOCK(slot), LW_EXCLUSIVE);
	if (!a->batch_made)
	{
		LeaseKey	key = lease_key(a->lease);
		LeaseBatch *b;

		LWLockAcquire(BATCHES_LOCK, LW_EXCLUSIVE);
		b = hash_search(lease_batches, &key, HASH_ENTER, NULL);
		b->xid = GetTopTransactionId();
		b->remaining = 0;
		b->claimed_at = lc->claimed_at;
		b->lease_until = lc->lease_until;
		b->owner_pid = MyProcPid;
		b->owner_start = MyStartTimestamp;
		LWLockRelease(BATCHES_LOCK);
		a->batch_made = true;
		a->batch_reserved = false;
	}
	for (int i = lc->flushed; i < a->n; i++)
	{
		/* the row lock keeps anyone else from leasing it meanwhile */
		if (!job_insert(a->ids[i], a->lease, lc->attempts[i], &lc->tids[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("job " INT64_FORMAT " of queue \"%s\" is under two batch leases",
							a->ids[i], lc->q->name),
					 errhint("Restart the server to rebuild the leases from their rows, and report the problem.")));
		/* counted as it goes, so that an abort undoes exactly this much */
		pg_atomic_fetch_add_u32(&lease_shared->leased[slot], 1);
		a->reserved--;
		lc->flushed = i + 1;
	}
	LWLockRelease(QUEUE_LOCK(slot));
	(void) batch_add(a->lease, n);
}

/*
 * The claim is over: write its lease row, and give back the room it did
 * not use.  Returns the number of jobs in the batch.
 */
int
QueueLeaseClaimEnd(QueueLeaseClaim *lc)
{
	LeaseAction *a = (LeaseAction *) lc->action;
	Datum		args[7];
	Datum	   *ids;
	Datum	   *attempts;

	if (!lc->on)
		return 0;
	QueueLeaseFlush(lc);
	if (a->reserved > 0)
		pg_atomic_fetch_sub_u32(&lease_shared->njobs, a->reserved);
	a->reserved = 0;
	if (a->batch_reserved)
		pg_atomic_fetch_sub_u32(&lease_shared->nbatches, 1);
	a->batch_reserved = false;
	lc->on = false;
	if (a->n == 0)
		return 0;

	ids = palloc(sizeof(Datum) * a->n);
	attempts = palloc(sizeof(Datum) * a->n);
	for (int i = 0; i < a->n; i++)
	{
		ids[i] = Int64GetDatum(a->ids[i]);
		attempts[i] = Int32GetDatum(lc->attempts[i]);
	}
	args[0] = Int64GetDatum(a->lease);
	args[1] = TimestampTzGetDatum(lc->lease_until);
	args[2] = TimestampTzGetDatum(lc->claimed_at);
	args[3] = Int32GetDatum(MyProcPid);
	args[4] = TimestampTzGetDatum(MyStartTimestamp);
	args[5] = PointerGetDatum(construct_array(ids, a->n, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE));
	args[6] = PointerGetDatum(construct_array(attempts, a->n, INT4OID, sizeof(int32), true, TYPALIGN_INT));
	queue_spi_check(lease_statement(lc->q, PLAN_LEASE_INSERT, args, 0),
					SPI_OK_INSERT, 1, "record a lease", lc->q->name);
	return a->n;
}

/* ---------------------------------------------------------------- ending leases */

/*
 * Whether job id of q is under a batch lease that the caller may act on:
 * committed, or taken by this transaction.  If so, fills *info.  The
 * caller made sure shared memory knows the queue's leases
 * (QueueLeaseTracking).
 */
bool
QueueLeaseFind(QueueInfo *q, int64 id, QueueLeased *info)
{
	LeasedJob	job;
	LeaseBatch	b;

	if (lease_jobs == NULL ||
		pg_atomic_read_u32(&lease_shared->leased[QUEUE_LOCK_NO(q->qno)]) == 0 ||
		!job_find(id, &job) || has_left(id) || !batch_get(job.lease, &b))
		return false;
	if (TransactionIdIsValid(b.xid) && !TransactionIdIsCurrentTransactionId(b.xid))
		return false;			/* not committed: nobody can have it yet */
	info->lease = job.lease;
	info->attempt = job.attempt;
	info->tid = job.tid;
	info->claimed_at = b.claimed_at;
	info->lease_until = b.lease_until;
	info->owner_pid = b.owner_pid;
	info->owner_start = b.owner_start;
	return true;
}

/* Job id left lease: its entry goes at commit. */
void
QueueLeaseDone(int32 qno, int64 lease, int64 id)
{
	LeaseAction *a = new_action(LA_DONE, qno, lease, 1);

	action_add_id(a, id);
	note_left(id);
}

/*
 * The lease's last job left it: delete its row, and its entry at commit.
 * Must be called inside QueueSpiBegin.
 */
void
QueueLeaseEnd(QueueInfo *q, int64 lease)
{
	Datum		arg = Int64GetDatum(lease);
	LeaseAction *a;

	queue_spi_check(lease_statement(q, PLAN_LEASE_DELETE, &arg, 1),
					SPI_OK_DELETE, -1, "end a lease", q->name);
	a = new_action(LA_DONE, q->qno, lease, 1);
	a->batch_gone = true;
}

/*
 * Whether this transaction finishing n more jobs of lease (besides what it
 * finished already) leaves none of them.
 */
bool
QueueLeaseWouldEnd(int64 lease, int n)
{
	LeaseBatch	b;
	int			pending = 0;
	ListCell   *lc;

	foreach(lc, actions)
	{
		LeaseAction *a = (LeaseAction *) lfirst(lc);

		if (a->kind == LA_DONE && a->lease == lease)
			pending += a->n;
	}
	return batch_get(lease, &b) && b.remaining - pending - n <= 0;
}

/* ---------------------------------------------------------------- transaction end */

static void
action_abort(LeaseAction *a)
{
	if (a->kind != LA_CLAIMED)
		return;
	for (int i = 0; i < a->n; i++)
		job_remove(a->ids[i], a->lease);
	if (a->batch_made)
		batch_remove(a->lease);
	if (a->reserved > 0)
		pg_atomic_fetch_sub_u32(&lease_shared->njobs, a->reserved);
	if (a->batch_reserved)
		pg_atomic_fetch_sub_u32(&lease_shared->nbatches, 1);
}

/*
 * A lease this transaction left without jobs, but whose row stays (its
 * last jobs finished at once in two transactions, each leaving the row
 * to the other), is the worker's to delete (queue._ended_leases): wake
 * it.  A transaction that deleted the row itself has removed the entry
 * by now, and wakes no one.
 */
static void
wake_for_emptied(void)
{
	ListCell   *lc;
	LeaseBatch	b;
	TimestampTz now_ts = 0;

	foreach(lc, actions)
	{
		LeaseAction *a = (LeaseAction *) lfirst(lc);

		if (a->emptied && batch_get(a->lease, &b))
		{
			if (now_ts == 0)
				now_ts = GetCurrentTimestamp();
			(void) QueueDueLower(a->qno, now_ts);
		}
	}
	if (now_ts != 0)
		QueueSignalScheduled(now_ts);
}

static void
action_commit(LeaseAction *a)
{
	int			left = 0;

	switch (a->kind)
	{
		case LA_CLAIMED:
			if (a->batch_made)
			{
				LeaseKey	key = lease_key(a->lease);
				LeaseBatch *b;

				LWLockAcquire(BATCHES_LOCK, LW_EXCLUSIVE);
				b = hash_search(lease_batches, &key, HASH_FIND, NULL);
				if (b != NULL)
					b->xid = InvalidTransactionId;
				LWLockRelease(BATCHES_LOCK);
			}
			/* nothing was reserved past the claim's end */
			break;
		case LA_DONE:
			for (int i = 0; i < a->n; i++)
				if (job_remove(a->ids[i], a->lease))
					left--;
			/* (the action of a deleted row lists no jobs) */
			if (a->n > 0)
				a->emptied = batch_add(a->lease, left) == 0;
			if (a->batch_gone)
				batch_remove(a->lease);
			break;
		case LA_DROPPED:
			for (int i = 0; i < a->n; i++)
				if (job_remove(a->ids[i], a->lease))
					left--;
			if (a->batch_gone)
				batch_remove(a->lease);
			else
				a->emptied = batch_add(a->lease, left) == 0;
			break;
		case LA_FORGET_DB:
			QueueLeaseForget(MyDatabaseId, 0);
			QueueSharedForgetDatabase(MyDatabaseId);
			break;
	}
}

static void
lease_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (actions == NIL)
	{
		if (event != XACT_EVENT_PRE_COMMIT && event != XACT_EVENT_PRE_PREPARE &&
			event != XACT_EVENT_PARALLEL_PRE_COMMIT)
			left_jobs = NULL;
		return;
	}
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			/* what it did to shared memory would be done by no one at COMMIT PREPARED */
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 ((LeaseAction *) linitial(actions))->kind == LA_FORGET_DB && list_length(actions) == 1 ?
					 errmsg("cannot PREPARE a transaction that dropped extension queue") :
					 errmsg("cannot PREPARE a transaction that claimed or finished leased jobs"),
					 errhint("Commit it directly, or move the queue calls out of the prepared transaction.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			foreach(lc, actions)
				action_commit((LeaseAction *) lfirst(lc));
			wake_for_emptied();
			actions = NIL;
			left_jobs = NULL;	/* its memory goes with the transaction */
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			foreach(lc, actions)
				action_abort((LeaseAction *) lfirst(lc));
			actions = NIL;
			left_jobs = NULL;
			break;
		default:
			break;
	}
}

static void
lease_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					   SubTransactionId parentSubid, void *arg)
{
	int			nest = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (left_jobs != NULL && (event == SUBXACT_EVENT_COMMIT_SUB || event == SUBXACT_EVENT_ABORT_SUB))
	{
		HASH_SEQ_STATUS status;
		LeftJob    *e;

		hash_seq_init(&status, left_jobs);
		while ((e = hash_seq_search(&status)) != NULL)
			if (e->nest < nest)
				continue;
			else if (event == SUBXACT_EVENT_COMMIT_SUB)
				e->nest = nest - 1;
			else
				hash_search(left_jobs, &e->id, HASH_REMOVE, NULL);
	}
	if (actions == NIL)
		return;
	foreach(lc, actions)
	{
		LeaseAction *a = (LeaseAction *) lfirst(lc);

		if (a->nest < nest)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			a->nest = nest - 1;
		else if (event == SUBXACT_EVENT_ABORT_SUB)
		{
			action_abort(a);
			actions = foreach_delete_current(actions, lc);
		}
	}
}

/*
 * Registered after xact.c's callbacks, so that ours run first: entries of
 * jobs made ready again are gone before the cursor comes back to them.
 */
void
QueueLeaseInit(void)
{
	RegisterXactCallback(lease_xact_callback, NULL);
	RegisterSubXactCallback(lease_subxact_callback, NULL);
}

/* ---------------------------------------------------------------- one job leaves */

/*
 * Before fail, extend or release act on job id: if it is under a batch
 * lease, write it as the running row a claim of its own would have left.
 * Its attempt is then no longer the one the lease lists, which takes it
 * off the lease without touching the lease's row: a transaction that
 * fails one job of a batch and keeps going does not hold up the worker's
 * return of the others.  With a token that is not the job's, nothing
 * happens (the caller then finds the job is not its own).  Must be called
 * inside QueueSpiBegin.
 */
void
QueueLeaseMaterialize(QueueInfo *q, int64 id, bool has_token, int32 token)
{
	QueueLeased info;
	Datum		args[6];

	if (!QueueLeaseTracking(q) || !QueueLeaseFind(q, id, &info) ||
		(has_token && token != info.attempt + 1))
		return;
	args[0] = Int64GetDatum(id);
	args[1] = Int32GetDatum(info.attempt);
	args[2] = TimestampTzGetDatum(info.claimed_at);
	args[3] = TimestampTzGetDatum(info.lease_until);
	args[4] = Int32GetDatum(info.owner_pid);
	args[5] = TimestampTzGetDatum(info.owner_start);
	queue_spi_check(SPI_execute_plan(QueueGetPlan(q, PLAN_LEASE_RUNNING), args, NULL, false, 1),
					SPI_OK_UPDATE, -1, "mark a leased job running", q->name);
	if (SPI_processed == 0)
		return;					/* the worker returned it first */
	QueueLeaseDone(q->qno, info.lease, id);
	if (QueueLeaseWouldEnd(info.lease, 0))
		QueueLeaseEnd(q, info.lease);
}

/*
 * Remove the entries of queue qno of database dboid (every queue's, with
 * qno 0): its queue or database was dropped, or a new queue took the
 * number of one dropped with its extension.
 */
void
QueueLeaseForget(Oid dboid, int32 qno)
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
		if (e->key.dboid == dboid && (qno == 0 || qno_of(e->key.id) == qno))
		{
			pg_atomic_fetch_sub_u32(&lease_shared->leased[QUEUE_SLOT(dboid, qno_of(e->key.id))], 1);
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
		if (b->key.dboid == dboid && (qno == 0 || qno_of(b->key.id) == qno))
		{
			hash_search(lease_batches, &b->key, HASH_REMOVE, NULL);
			removed++;
		}
	LWLockRelease(BATCHES_LOCK);
	pg_atomic_fetch_sub_u32(&lease_shared->nbatches, removed);
}

/*
 * When the first batch lease of queue qno runs out, or 0 if it has none:
 * for when the queue falls due next (claim.c), which claimers could not
 * read from the lease table.
 */
TimestampTz
QueueLeaseNextExpiry(int32 qno)
{
	HASH_SEQ_STATUS status;
	LeaseBatch *b;
	TimestampTz first = 0;

	if (lease_batches == NULL || pg_atomic_read_u32(&lease_shared->leased[QUEUE_LOCK_NO(qno)]) == 0)
		return 0;
	LWLockAcquire(BATCHES_LOCK, LW_SHARED);
	hash_seq_init(&status, lease_batches);
	while ((b = hash_seq_search(&status)) != NULL)
		if (b->key.dboid == MyDatabaseId && qno_of(b->key.id) == qno &&
			(first == 0 || b->lease_until < first))
			first = b->lease_until;
	LWLockRelease(BATCHES_LOCK);
	return first;
}

/* ---------------------------------------------------------------- SQL */

/*
 * Queue qno, if the role has privilege mode on its job table (or, with
 * lease_table, on its lease table); raises an error otherwise.  The
 * functions below are executable by everyone, since the SQL functions call
 * them as their caller: each needs what its legitimate callers have, and
 * what would let the role do the same harm anyway.  Must be called inside
 * QueueSpiBegin.
 */
static QueueInfo *
checked_queue(int32 qno, bool lease_table, AclMode mode)
{
	QueueInfo  *q = QueueLookupByQno(qno, true);
	Oid			relid = InvalidOid;

	if (q != NULL)
		relid = lease_table ? lease_relid(q) : QueueTableRelid(q);
	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("queue number %d does not exist", qno),
				 errhint("List queues with SELECT * FROM queue.queues.")));
	if (pg_class_aclcheck(relid, GetUserId(), mode) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(relid));
	return q;
}

/*
 * queue._leased(id): whether the job is under a batch lease, for the SQL
 * that acts on ready rows.  Its caller holds the job's row lock (or the
 * queue's leases, _hold_leases), so no claim is leasing the job right
 * now.  Needs SELECT on the job's table, checked once per transaction and
 * queue: it runs for every ready row a purge or a claim through SPI sees.
 */
PG_FUNCTION_INFO_V1(queue_leased);
Datum
queue_leased(PG_FUNCTION_ARGS)
{
	static LocalTransactionId checked_lxid = InvalidLocalTransactionId;
	static int32 checked_qno = 0;
	static Oid	checked_user = InvalidOid;
	int64		id = PG_GETARG_INT64(0);
	int32		qno = qno_of(id);
	QueueInfo  *q;
	bool		leased = false;

	if (lease_jobs == NULL || id <= 0)
		PG_RETURN_BOOL(false);
	QueueSpiBegin();
	if (checked_lxid != MyProc->lxid || checked_qno != qno || checked_user != GetUserId())
	{
		q = checked_queue(qno, false, ACL_SELECT);
		checked_lxid = MyProc->lxid;
		checked_qno = qno;
		checked_user = GetUserId();
	}
	else
		q = QueueLookupById(id, false);
	if (QueueLeaseTracking(q) &&
		pg_atomic_read_u32(&lease_shared->leased[QUEUE_LOCK_NO(q->qno)]) > 0)
		leased = job_find(id, NULL) && !has_left(id);
	QueueSpiEnd();
	PG_RETURN_BOOL(leased);
}

/*
 * queue._lease_claimed_at(id, attempt): when the batch lease a job whose
 * row has that attempt is under was taken, or NULL; for queue.history(),
 * read as the lease table's owner (see lease_statement).  Needs SELECT on
 * the job's table.
 */
PG_FUNCTION_INFO_V1(queue_lease_claimed_at);
Datum
queue_lease_claimed_at(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	QueueInfo  *q;
	Oid			relid;
	bool		isnull = true;
	Datum		at = (Datum) 0;

	QueueSpiBegin();
	q = checked_queue(qno_of(id), false, ACL_SELECT);
	relid = lease_relid(q);
	if (OidIsValid(relid))
	{
		Datum		args[2] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)};
		Oid			argtypes[2] = {INT8OID, INT4OID};
		QueueAsRole as;
		int			ret;

		QueueAsRoleBegin(&as, QueueRelOwner(relid, q->name));
		ret = SPI_execute_with_args(psprintf("SELECT l.claimed_at FROM %s l, unnest(l.ids, l.attempts) u(id, attempt)"
											 " WHERE u.id = $1 AND u.attempt = $2",
											 quote_qualified_identifier("queue", get_rel_name(relid))),
									2, argtypes, args, NULL, true, 1);
		QueueAsRoleEnd(&as);
		queue_spi_check(ret, SPI_OK_SELECT, -1, "read the leases", q->name);
		if (SPI_processed == 1)
			at = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	}
	QueueSpiEnd();
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(at);
}

/*
 * queue._hold_leases(qno): until commit, no batch lease of the queue
 * starts or is loaded, and the batch claims in flight are over.  Needs
 * DELETE on the job table (queue.purge, which holds them, deletes jobs).
 */
PG_FUNCTION_INFO_V1(queue_hold_leases);
Datum
queue_hold_leases(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);

	QueueSpiBegin();
	(void) checked_queue(qno, false, ACL_DELETE);
	QueueSpiEnd();
	(void) lock_leases(qno, ExclusiveLock, true);
	PG_RETURN_VOID();
}

/*
 * queue._share_leases(qno): the worker ends leases only where nothing
 * holds them still, and does not wait for that.  Needs DELETE on the
 * lease table.
 */
PG_FUNCTION_INFO_V1(queue_share_leases);
Datum
queue_share_leases(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);

	QueueSpiBegin();
	(void) checked_queue(qno, true, ACL_DELETE);
	QueueSpiEnd();
	PG_RETURN_BOOL(lock_leases(qno, ShareLock, false));
}

/*
 * queue._lease_dropped(qno, lease, ids): this transaction took the jobs
 * ids off the lease (deleting its row, or taking them off it) and wrote
 * them: their entries go at commit, and the lease's if its row is gone.
 * Needs DELETE on the lease table, and the row must no longer list them:
 * nothing else may take jobs out of a lease.
 */
PG_FUNCTION_INFO_V1(queue_lease_dropped);
Datum
queue_lease_dropped(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);
	int64		lease = PG_GETARG_INT64(1);
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(2);
	Datum	   *ids;
	bool	   *nulls;
	int			n;
	QueueInfo  *q;
	LeaseAction *a;
	Datum		arg = Int64GetDatum(lease);

	Oid			argtypes[2] = {INT8OID, INT8ARRAYOID};
	Datum		args[2];
	bool		gone;
	bool		isnull;

	QueueSpiBegin();
	q = checked_queue(qno, true, ACL_DELETE);
	if (qno_of(lease) != qno)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease " INT64_FORMAT " is not one of queue \"%s\"", lease, q->name),
				 errhint("queue._lease_dropped() is for the queue's upkeep.")));
	args[0] = arg;
	args[1] = PointerGetDatum(arr);
	queue_spi_check(SPI_execute_with_args(psprintf("SELECT ids && $2 FROM %s WHERE lease = $1",
												   quote_qualified_identifier("queue",
																			  get_rel_name(lease_relid(q)))),
										  2, argtypes, args, NULL, false, 1),
					SPI_OK_SELECT, -1, "read the leases", q->name);
	gone = SPI_processed == 0;
	if (!gone && DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lease " INT64_FORMAT " of queue \"%s\" still lists the jobs", lease, q->name),
				 errhint("Take them off the lease's row first; queue._lease_dropped() is for the queue's upkeep.")));
	QueueSpiEnd();
	if (lease_jobs == NULL)
		PG_RETURN_VOID();
	deconstruct_array(arr, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE, &ids, &nulls, &n);
	a = new_action(LA_DROPPED, qno, lease, n);
	a->batch_gone = gone;
	for (int i = 0; i < n; i++)
		if (!nulls[i] && qno_of(DatumGetInt64(ids[i])) == qno)
		{
			action_add_id(a, DatumGetInt64(ids[i]));
			note_left(DatumGetInt64(ids[i]));
		}
	PG_RETURN_VOID();
}

/*
 * DROP EXTENSION queue (or DROP SCHEMA queue) in this transaction: at
 * commit, what shared memory holds of this database's queues goes, so
 * that queues made again (or restored from a dump) with the same numbers
 * start afresh.
 */
void
QueueLeaseDroppingExtension(void)
{
	(void) new_action(LA_FORGET_DB, 0, 0, 1);
}

/*
 * queue._take_leases(qno): every batch lease of the queue ends, for
 * queue._settle_leases, which writes their jobs as running rows.  The
 * jobs' rows are locked first (as the caller, in id order), then the
 * lease rows deleted (as the lease table's owner) and returned; their
 * entries go at commit.  No batch lease of the queue starts until the
 * transaction ends.  Needs UPDATE on the job table.
 */
PG_FUNCTION_INFO_V1(queue_take_leases);
Datum
queue_take_leases(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		qno = PG_GETARG_INT32(0);
	QueueInfo  *q;
	Oid			relid;
	const char *l;
	QueueAsRole as;
	Datum		ids = (Datum) 0;
	bool		isnull = true;
	int			ret;

	InitMaterializedSRF(fcinfo, 0);
	QueueSpiBegin();
	q = checked_queue(qno, false, ACL_UPDATE);
	/* what queue.alter needs: a consumer may not end the leases of others */
	QueueCheckConfigPrivilege(ACL_UPDATE);
	relid = lease_relid(q);
	if (!OidIsValid(relid))
	{
		QueueSpiEnd();
		return (Datum) 0;
	}
	(void) lock_leases(qno, ExclusiveLock, true);
	l = quote_qualified_identifier("queue", get_rel_name(relid));

	/*
	 * With snapshots taken after the lock, also in REPEATABLE READ: the
	 * leases of claims that committed meanwhile are ended too.
	 */
	QueueAsRoleBegin(&as, QueueRelOwner(relid, q->name));
	ret = execute_latest(psprintf("SELECT array_agg(u.id) FROM %s, unnest(ids) u(id)", l), NULL, true, 1);
	QueueAsRoleEnd(&as);
	queue_spi_check(ret, SPI_OK_SELECT, 1, "read the leases", q->name);
	ids = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		queue_spi_check(execute_latest(psprintf("SELECT id FROM %s WHERE id = ANY ($1) ORDER BY id FOR UPDATE",
												quote_qualified_identifier("queue", psprintf("q_%s", q->name))),
									   &ids, false, 0),
						SPI_OK_SELECT, -1, "lock leased jobs", q->name);
	}

	QueueAsRoleBegin(&as, QueueRelOwner(relid, q->name));
	ret = execute_latest(psprintf("DELETE FROM %s RETURNING lease, ids, attempts, claimed_at, lease_until,"
								  " owner_pid, owner_start", l), NULL, false, 0);
	QueueAsRoleEnd(&as);
	queue_spi_check(ret, SPI_OK_DELETE_RETURNING, -1, "end the leases", q->name);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		values[7];
		bool		nulls[7];
		Datum	   *jobs;
		int			n;
		LeaseAction *a;

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if (lease_jobs == NULL)
			continue;
		deconstruct_array(DatumGetArrayTypeP(values[1]), INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
						  &jobs, NULL, &n);
		a = new_action(LA_DROPPED, qno, DatumGetInt64(values[0]), n);
		a->batch_gone = true;
		for (int j = 0; j < n; j++)
		{
			action_add_id(a, DatumGetInt64(jobs[j]));
			note_left(DatumGetInt64(jobs[j]));
		}
	}
	QueueSpiEnd();
	return (Datum) 0;
}

/*
 * queue._ended_leases(qno): the leases of the queue all of whose jobs
 * finished, but whose rows stay (see LA_DONE): for the worker to delete.
 * Needs DELETE on the lease table.
 */
PG_FUNCTION_INFO_V1(queue_ended_leases);
Datum
queue_ended_leases(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);
	Datum	   *leases = NULL;
	int			n = 0;

	QueueSpiBegin();
	(void) checked_queue(qno, true, ACL_DELETE);
	QueueSpiEnd();
	if (lease_batches != NULL)
	{
		HASH_SEQ_STATUS status;
		LeaseBatch *b;
		int			cap = 0;

		LWLockAcquire(BATCHES_LOCK, LW_SHARED);
		hash_seq_init(&status, lease_batches);
		while ((b = hash_seq_search(&status)) != NULL)
		{
			if (b->key.dboid != MyDatabaseId || qno_of(b->key.id) != qno ||
				b->remaining > 0 || TransactionIdIsValid(b->xid))
				continue;
			if (n == cap)
			{
				cap = Max(cap * 2, 16);
				leases = leases == NULL ? palloc(sizeof(Datum) * cap) :
					repalloc(leases, sizeof(Datum) * cap);
			}
			leases[n++] = Int64GetDatum(b->key.id);
		}
		LWLockRelease(BATCHES_LOCK);
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(leases, n, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE));
}
