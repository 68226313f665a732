/*-------------------------------------------------------------------------
 *
 * queue.h
 *	  Declarations shared by the C sources of the queue extension.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_H
#define QUEUE_H

#include "datatype/timestamp.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "storage/itemptr.h"
#include "utils/jsonb.h"

/*
 * A job id is (value drawn from the queue's sequence) * QUEUE_ID_FACTOR +
 * the queue's number, so any function given only an id knows its queue.
 */
#define QUEUE_ID_FACTOR		INT64CONST(1000000)
#define QUEUE_MAX_CLAIM		10000
#define QUEUE_MAX_KEY_LEN	512

/* Stored job states, as counted for queue.stats. */
typedef enum QueueState
{
	QS_NONE = -1,				/* not in the hot table */
	QS_READY,
	QS_SCHEDULED,
	QS_RUNNING,
	QS_DEAD,
	QS_WAITING,
	QS_NSTATES
} QueueState;

/* Most scheduled jobs one claim promotes (PLAN_PROMOTE's $4). */
#define PROMOTE_BATCH 1000

/* Saved plans of one queue, made on first use by each backend. */
typedef enum QueuePlanId
{
	PLAN_INSERT,				/* enqueue one job */
	PLAN_INSERT_DEDUP,			/* enqueue one job with a dedup_key */
	PLAN_FIND_DEDUP,			/* the unfinished job holding a dedup_key */
	PLAN_INSERT_BATCH,			/* enqueue an array of jobs */
	PLAN_PROMOTE,				/* scheduled jobs that came due become ready */
	PLAN_CLAIM_FRONT,			/* claim scanning the ready index from its start */
	PLAN_CLAIM_AT,				/* claim from the cursor within its priority */
	PLAN_CLAIM_BELOW,			/* claim from the priorities below the cursor */
	PLAN_LEASE_FRONT,			/* the same three, marking the jobs running */
	PLAN_LEASE_AT,				/* in place: a claim that is its own transaction */
	PLAN_LEASE_BELOW,
	PLAN_COMPLETE_ARCHIVE,		/* complete, returning the rows for the archive */
	PLAN_COMPLETE_DELETE,		/* complete, retention 0 */
	PLAN_LOCK_RUNNING,			/* lock a running job for fail/release */
	PLAN_FAIL,					/* record a failed attempt */
	PLAN_RELEASE,				/* give a job back without a failure */
	PLAN_EXTEND,				/* push a lease out */
	PLAN_STATE,					/* the state of a job, for error messages */
	PLAN_GROUP_BUSY,			/* does a group have an unfinished job? */
	PLAN_GROUP_ADVANCE,			/* the next job of a group becomes its head */
	PLAN_GROUP_REQUEUE,			/* a retried job goes behind its group */
	PLAN_SLOTS_TAKE,			/* lock free running slots (max_running) */
	PLAN_SLOTS_ASSIGN,			/* give slots to claimed jobs */
	PLAN_SLOTS_FREE,			/* jobs stopped running: free their slots */
	PLAN_SLOTS_MIGRATE,			/* a job over the limit takes a freed slot */
	PLAN_REINSERT,				/* write held jobs back as running rows */
	PLAN_ARCHIVE_HELD,			/* archive held jobs completed in their claim's transaction */
	PLAN_LEASE_INSERT,			/* the row of a batch lease (lease.c) */
	PLAN_LEASE_DELETE,			/* ... gone with its last job */
	PLAN_LEASE_RUNNING,			/* a job leaves its batch lease as a running row */
	PLAN_TICK_EXPIRE,			/* upkeep: expired leases and orphans return */
	PLAN_TICK_NEXT_DUE,			/* upkeep: when to look again */
	PLAN_TICK_LEASE_DUE,		/* upkeep: the first batch lease to run out */
	NUM_QUEUE_PLANS
} QueuePlanId;

typedef struct QueueInsertState QueueInsertState;

typedef struct QueueInfo
{
	int32		qno;			/* hash key */
	char		name[NAMEDATALEN];
	Oid			seqid;			/* queue.q_<name>_seq */
	int32		max_attempts;
	Interval	lease;
	Interval	backoff_base;
	Interval	backoff_max;
	int32		max_running;	/* 0: unlimited */
	bool		group_requeue;	/* a retried job goes behind its group */
	bool		keep_archive;	/* retention > 0 */
	int16		archive_seg;	/* the archive segment finished jobs go to */
	bool		paused;
	SPIPlanPtr	plans[NUM_QUEUE_PLANS];
	QueueInsertState *insert;	/* insert.c, made on first use */
	QueueInsertState *archive_insert;	/* the same for the archive */
} QueueInfo;

/* What the launcher and a database worker share about one database. */
typedef struct QueueDbSlot
{
	Oid			dboid;			/* InvalidOid: free slot */
	bool		registered;		/* the extension may be installed there */
	uint32		reg_gen;		/* bumped by each registration */
	pid_t		pid;			/* its worker, or 0 */
	struct Latch *latch;		/* its worker's latch, or NULL */
	bool		notify_pending; /* some queue has listeners to wake */
	bool		notify_all;		/* ... and we could not tell which */
	bool		orphan_check;	/* a backend holding claims exited */
	TimestampTz wake_at;		/* earliest newly scheduled job, or 0 */
	TimestampTz sleep_until;	/* its worker sleeps until then; 0 awake */
	TimestampTz hold_until;		/* no worker before this (DROP DATABASE) */
	TimestampTz next_start;		/* no restart before this (after a crash) */
} QueueDbSlot;

/* GUCs (queue.c, lease.c) */
extern int	queue_max_payload_size;
extern int	queue_max_leased_jobs;
extern int	queue_max_queues;
extern int	queue_max_databases;
extern int	queue_worker_naptime;
extern int	queue_notify_busy_interval;

/* queue.c */
extern void queue_check_key(const char *what, text *key);
extern void queue_check_writer(int32 qno);

/* Running code as another role (queue.c); see QueueAsRoleBegin. */
typedef struct QueueAsRole
{
	Oid			save_userid;
	int			save_sec;
	int			save_nestlevel;
} QueueAsRole;

extern void QueueAsRoleBegin(QueueAsRole *as, Oid role);
extern Oid	QueueRelOwner(Oid relid, const char *name);
extern void QueueAsRoleEnd(QueueAsRole *as);
extern void queue_spi_check(int ret, int expected, int64 want_rows, const char *what,
							const char *qname);

/* qcache.c: finding a queue and its plans */
extern void QueueCacheInit(void);
extern bool QueueCacheStale(void);
extern void QueueCacheForget(void);
extern QueueInfo *QueueLookupByName(text *name);
extern QueueInfo *QueueLookupById(int64 id, bool missing_ok);
extern QueueInfo *QueueLookupByQno(int32 qno, bool missing_ok);
extern int	QueueExecuteLatest(SPIPlanPtr plan, Datum *args, bool read_only, long count);
extern void QueueCheckConfigPrivilege(AclMode mode);
extern SPIPlanPtr QueueGetPlan(QueueInfo *q, QueuePlanId which);
extern void QueueSpiBegin(void);
extern void QueueSpiEnd(void);
extern int64 QueueNextSeq(QueueInfo *q);
extern Oid	QueueSeqRelid(QueueInfo *q);
extern Oid	QueueTableRelid(QueueInfo *q);

/* insert.c: rows into a queue's tables, without the executor */
extern void QueueInsertInit(void);
extern void QueueInsertForget(QueueInsertState *st);
extern bool QueueInsertJob(QueueInfo *q, int64 id, TimestampTz run_at, QueueState state,
						   int32 priority, text *group_key, Jsonb *payload);
extern bool QueueInsertJobs(QueueInfo *q, int n, const Datum *ids, TimestampTz run_at,
							QueueState first_state, QueueState state, int32 priority,
							text *group_key, const Datum *payloads);
extern bool QueueArchiveRows(QueueInfo *q, int n, Datum *const *values, bool *const *nulls,
							 TimestampTz finished_at);

/* lease.c: one lease for a batch of jobs (functions below) */
typedef struct QueueLeaseClaim
{
	bool		track;			/* the queue may have batch leases: check rows */
	bool		on;				/* this claim takes a batch lease */
	QueueInfo  *q;
	TimestampTz claimed_at;
	TimestampTz lease_until;
	void	   *action;			/* what its transaction must undo or finish */
	ItemPointerData *tids;		/* rows of the jobs staged ... */
	int32	   *attempts;		/* ... and their attempts */
	int			flushed;		/* jobs whose entries were added */
} QueueLeaseClaim;

typedef struct QueueLeased
{
	int64		lease;
	int32		attempt;		/* the row's: the claim handed out the next */
	ItemPointerData tid;		/* the job's row, if known */
	TimestampTz claimed_at;
	TimestampTz lease_until;
	int32		owner_pid;
	TimestampTz owner_start;
} QueueLeased;

/* take.c: claims without the executor */
typedef void (*QueueClaimEmit) (void *arg, const Datum *values, const bool *nulls);
extern int	QueueTakeJobs(QueueInfo *q, QueuePlanId which, bool in_place, const Datum *args,
						  int want, QueueLeaseClaim *lc, QueueClaimEmit emit, void *arg);

/* delete.c: completing running jobs without the executor */
extern int	QueueDeleteRunning(QueueInfo *q, const Datum *ids, int n, bool has_token, int32 token,
							   Datum **values, bool **nulls, Datum *retry, int *nretry);

/* groups.c: one job at a time per group_key, and max_running */
extern bool QueueGroupBusy(QueueInfo *q, text *group_key);
extern void QueueGroupAdvance(QueueInfo *q, Datum *group_keys, int n);
extern int	QueueSlotsTake(QueueInfo *q, int want, Datum **slots);
extern void QueueSlotsAssign(QueueInfo *q, Datum *slots, Datum *ids, int n);
extern void QueueSlotsFree(QueueInfo *q, Datum *ids, int n);

/*
 * held.c: jobs claimed by this transaction.  A claim statement returns, in
 * this order, the columns a held job keeps (claimed_at is added by us).
 */
#define HELD_ID				0
#define HELD_PAYLOAD		1
#define HELD_ATTEMPT		2
#define HELD_GROUP_KEY		3
#define HELD_ENQUEUED_AT	4
#define HELD_LEASE_UNTIL	5
#define HELD_PRIORITY		6
#define HELD_RANK			7
#define HELD_RUN_AT			8
#define HELD_DEDUP_KEY		9
#define HELD_LAST_ERROR		10
#define HELD_HISTORY		11
#define HELD_UNCOUNTED		12
#define HELD_CLAIMED_AT		13
#define HELD_NCOLS			14
extern void QueueHeldInit(void);
extern void QueueHeldAddJob(int32 qno, const Datum *values, const bool *nulls);
extern void QueueArchive(QueueInfo *q, int n, Datum *const *values, bool *const *nulls);
extern int	QueueHeldCompleteIds(QueueInfo *q, Datum *ids, int n, bool has_token, int32 token,
								 Datum *done_ids, int *ndone, Datum *groups, int *ngroups);
extern void QueueHeldWriteBack(QueueInfo *q, int64 id);
extern bool QueueHeldInGroup(int32 qno, text *group_key);
extern int64 QueueHeldWithDedup(int32 qno, text *dedup_key);

/* shmem.c: per-queue state shared by all backends */
extern void QueueShmemRequest(void);
extern bool QueueShmemActive(void);
extern bool QueueCursorGet(int32 qno, TimestampTz now, int32 *prio, int64 *rank, uint64 *gen);
extern void QueueCursorReserve(int32 qno, int32 prio, int64 rank, int n, uint64 gen);
extern void QueueCursorAdvance(int32 qno, int32 prio, int64 rank, uint64 gen);
extern void QueueCursorLower(int32 qno, int32 prio, int64 rank);
extern void QueueCursorReset(int32 qno);
extern void QueueCursorSkipped(int32 qno, int32 prio, int64 rank, TimestampTz now);
extern void QueueCursorUnskip(int32 qno);
extern void QueueSharedForget(int32 qno);
extern void QueueSharedForgetDatabase(Oid dboid);
extern void QueueCountFinished(int32 qno, int64 completed, int64 failed);
extern bool QueueRecentCounts(int32 qno, int64 *completed, int64 *failed);
extern bool QueuePromoteDue(int32 qno, TimestampTz now);
extern int	QueueMarkNotify(int32 qno);
extern void QueueCountsApply(int32 qno, const int64 *delta);
extern void QueueCountsInvalidate(int32 qno);
extern bool QueueCountsGet(int32 qno, int64 *counts, uint64 *gen);
extern void QueueCountsSet(int32 qno, uint64 gen, const int64 *counts);
extern QueueState QueueStateFromName(const char *name);
extern bool QueueDueGet(int32 qno, TimestampTz *due, uint64 *gen);
extern bool QueueDueSet(int32 qno, TimestampTz due, uint64 gen, bool raise_only);
extern bool QueueDueLower(int32 qno, TimestampTz at);
extern bool QueueMarkMayWait(int32 qno);
extern List *QueueTakeNotifications(Oid dboid, TimestampTz now_ts, int64 idle_us, TimestampTz *retry_at);

extern int	QueueLeasesLoaded(int32 qno);
extern void QueueLeasesSetLoaded(int32 qno);

/* lease.c */
extern Size QueueLeaseShmemSize(void);
extern void QueueLeaseRequestLocks(void);
extern void QueueLeaseShmemInit(void);
extern void QueueLeaseInit(void);
extern bool QueueLeaseTracking(QueueInfo *q);
extern void QueueLeaseClaimBegin(QueueLeaseClaim *lc, QueueInfo *q, int want,
								 TimestampTz claimed_at, TimestampTz lease_until);
extern struct LWLock *QueueLeaseLock(int32 qno);
extern bool QueueLeaseHeldLocked(int32 qno, int64 id);
extern bool QueueLeaseMayBatch(QueueLeaseClaim *lc, int64 id);
extern void QueueLeaseStage(QueueLeaseClaim *lc, int64 id, const ItemPointerData *tid, int32 attempt);
extern void QueueLeaseFlush(QueueLeaseClaim *lc);
extern int	QueueLeaseClaimEnd(QueueLeaseClaim *lc);
extern bool QueueLeaseFind(QueueInfo *q, int64 id, QueueLeased *info);
extern void QueueLeaseDone(int32 qno, int64 lease, int64 id);
extern void QueueLeaseEnd(QueueInfo *q, int64 lease);
extern bool QueueLeaseWouldEnd(int64 lease, int n);
extern void QueueLeaseMaterialize(QueueInfo *q, int64 id, bool has_token, int32 token);
extern void QueueLeaseForget(Oid dboid, int32 qno);
extern void QueueLeaseDroppingExtension(void);
extern TimestampTz QueueLeaseNextExpiry(int32 qno);

/* wake.c: waking workers and waiting claims */
extern Size QueueWakeShmemSize(void);
extern void QueueWakeShmemInit(void);
extern bool QueueWakeActive(void);
extern void QueueRegisterDatabase(Oid dboid);
extern void QueueSignalReady(int32 qno, int64 n);
extern void QueueSignalClaimShort(int32 qno);
extern void QueueSignalDue(int32 qno);
extern void QueueSignalScheduled(TimestampTz at);
extern void QueueSignalClaimerExit(void);
extern void QueueWaitBegin(int32 qno);
extern void QueueWaitAtEnd(int nest);
extern bool QueueWaitersPresent(int32 qno, TimestampTz since);
extern uint64 QueueWaitPrepare(int32 qno, bool blind);
extern bool QueueWaitTimed(int32 qno, TimestampTz at, TimestampTz now);
extern void QueueWaitUntimed(TimestampTz due, TimestampTz now);
extern bool QueueWaitSleep(int32 qno, uint64 gen, long timeout_ms);
extern void QueueWaitDone(void);
extern bool QueueLauncherAttach(struct Latch *latch);
extern void QueueLauncherDetach(void);
extern bool QueueLauncherMissing(void);
extern int	QueueDbSlotsCopy(QueueDbSlot *out);
extern void QueueDbSlotSet(Oid dboid, bool forget, pid_t pid, TimestampTz next_start);
extern bool QueueDbWorkerAttach(Oid dboid, struct Latch *latch);
extern void QueueDbWorkerDetach(Oid dboid, bool unregister);
extern void QueueDbWorkerTake(Oid dboid, bool *notify, bool *notify_all,
							  bool *orphans, TimestampTz *wake_at);
extern TimestampTz QueueDbWorkerSleep(Oid dboid, TimestampTz until);
extern void QueueDbWorkerHold(Oid dboid, TimestampTz hold_until);

/* owners.c: which sessions that claimed jobs are alive */
extern Size QueueOwnersShmemSize(void);
extern void QueueOwnersShmemInit(void);
extern void QueueOwnerPublish(void);
extern void QueueOwnerCommitted(void);

/* listen.c: which backends LISTEN on queue channels */
extern Size QueueListenShmemSize(void);
extern void QueueListenShmemInit(void);
extern bool QueueAnyListener(Oid dboid);
extern void QueueListenUtility(Node *parsetree);

/* worker.c */
extern void QueueWorkerRegister(void);
extern void QueueLauncherEnsure(void);
extern void QueueUtilityHookInstall(void);

/* flush.c */
extern bool queue_synchronous_claims;
extern void QueueFlushInit(void);
extern void QueueFlushClaimStart(void);
extern void QueueFlushClaimEnd(bool held);

/* xact.c: what a transaction must tell shared memory when it ends */
extern void QueueXactInit(void);
extern void QueueXactMadeReady(int32 qno, int32 prio, int64 rank, int64 n);
extern void QueueXactClaimed(int32 qno, int32 prio, int64 rank, bool took);
extern void QueueXactResetAtEnd(int32 qno, bool forget, bool keep_due);
extern void QueueXactUnskipAtEnd(int32 qno);
extern void QueueXactSlotsFreed(int32 qno, int64 n);
extern void QueueXactFinished(int32 qno, int64 completed, int64 failed);
extern void QueueXactNextDue(int32 qno, TimestampTz promoted_at, TimestampTz due, uint64 gen);
extern void QueueXactScheduled(int32 qno, TimestampTz run_at);
extern void QueueXactLeased(int32 qno, TimestampTz until);
extern void QueueXactCount(int32 qno, QueueState from, QueueState to, int64 n);
extern void QueueXactRecount(int32 qno);
extern void QueueXactNewQueue(int32 qno);
extern void QueueXactPendingCounts(int32 qno, int64 *counts);
extern void QueueXactRegisterDatabase(Oid dboid);
extern bool QueueXactScanStart(int32 qno, int32 *prio, int64 *rank);

#endif							/* QUEUE_H */
