/*-------------------------------------------------------------------------
 *
 * claim.c
 *	  queue.claim: taking due jobs nobody else holds.
 *
 * A claim locks up to max_jobs ready jobs with FOR UPDATE SKIP LOCKED in
 * claim order (priority descending, then rank) and marks them running under
 * a lease.  Its index scan starts at the queue's shared cursor
 * (shmem/queuestate.c)
 * rather than at the front of the ready index, so its cost does not grow
 * with the dead index entries that claimed jobs leave behind while an old
 * snapshot keeps vacuum from removing them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "storage/proc.h"
#include "tcop/pquery.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/portal.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/errors.h"
#include "base/job.h"
#include "base/jobid.h"
#include "base/settings.h"
#include "catalog/acl.h"
#include "catalog/plans.h"
#include "catalog/spi.h"
#include "ops/groups.h"
#include "shmem/leasemap.h"
#include "shmem/owners.h"
#include "shmem/queuestate.h"
#include "shmem/ratelimit.h"
#include "shmem/waits.h"
#include "shmem/wakeups.h"
#include "storage/claimrows.h"
#include "xact/held.h"
#include "xact/leases.h"
#include "xact/pending.h"
#include "xact/syncclaims.h"

/* How many jobs one claim took, and the claim order of the last. */
typedef struct ClaimSpan
{
	int			count;
	Datum	   *ids;			/* ids taken, if max_running needs them */
	int32		last_prio;
	int64		last_rank;
	bool		held;			/* some were held, not leased in place */
	TimestampTz refill_at;		/* the rate limit held it back until then */
} ClaimSpan;

/*
 * Make up to limit scheduled jobs that came due ready, in this transaction,
 * and learn when the queue falls due next (see QueueXactNextDue).  Returns
 * how many it made ready.
 */
static int64
promote_due(QueueInfo *q, TimestampTz now_ts, int limit)
{
	Datum		args[4];
	char		nulls[4] = "    ";
	bool		isnull;
	int64		promoted;
	TimestampTz known;
	TimestampTz batch_due;
	uint64		gen;

	/* gen must be read before the statement takes its snapshot */
	(void) QueueDueGet(q->qno, &known, &gen);
	args[0] = TimestampTzGetDatum(now_ts);
	/* batch leases run out too: the lease table is not the claimer's to read */
	batch_due = LeaseMapNextExpiry(q->qno);
	args[1] = TimestampTzGetDatum(batch_due);
	if (batch_due == 0)
		nulls[1] = 'n';

	/*
	 * A due job we could not lock is most likely another promotion's, but
	 * may be held by something that leaves it scheduled: nobody would then
	 * look at it again before the worker's cleanup, a waiting claim not
	 * before its deadline.  A naptime is the delay the worker's look would
	 * have had anyway.  (A promotion that took nothing stores nothing:
	 * the worker's look, due then, caps its own due time the same way.)
	 */
	args[2] = TimestampTzGetDatum(now_ts + queue_worker_naptime * INT64CONST(1000));
	args[3] = Int32GetDatum(limit);
	QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_PROMOTE), args, nulls, false, 1),
					SPI_OK_SELECT, 1, "promote scheduled jobs", q->name);
	promoted = DatumGetInt64(QueuePlanValue(PLAN_PROMOTE, 0, "promoted", &isnull));

	/*
	 * FOR UPDATE locks the latest version of a row that another promotion
	 * made ready after our snapshot, and then passes over it: the job is
	 * ready, and locked by us until we end.  Claims pass over it meanwhile,
	 * as one being claimed, and would find it only at the cursor's next
	 * recheck, up to a second later.  Our snapshot still shows such a job
	 * as due and scheduled.
	 */
	if (DatumGetBool(QueuePlanValue(PLAN_PROMOTE, 0, "left_due", &isnull)))
		QueueXactUnskipAtEnd(q->qno);
	QueueXactCount(q->qno, JS_SCHEDULED, JS_READY, promoted);
	if (promoted == 0)
		return 0;
	QueueXactMadeReady(q->qno,
					   DatumGetInt32(QueuePlanValue(PLAN_PROMOTE, 0, "priority", &isnull)),
					   DatumGetInt64(QueuePlanValue(PLAN_PROMOTE, 0, "rank", &isnull)), promoted);
	/* A transaction snapshot may predate gen. */
	if (!IsolationUsesXactSnapshot())
	{
		Datum		next = QueuePlanValue(PLAN_PROMOTE, 0, "next_due", &isnull);

		QueueXactNextDue(q->qno, now_ts, isnull ? DT_NOEND : DatumGetTimestampTz(next), gen);
	}
	return promoted;
}

/* Where run_claim() puts the jobs it took. */
typedef struct ClaimOut
{
	QueueInfo  *q;
	bool		hold;			/* deleted: keep them until commit (xact/held.c) */
	ReturnSetInfo *rsinfo;
	ClaimSpan  *span;
	TimestampTz lease_until;	/* of the jobs taken */
} ClaimOut;

/* One job taken: its carried columns. */
static void
emit_job(void *arg, const Datum *values, const bool *nulls)
{
	ClaimOut   *out = (ClaimOut *) arg;
	ClaimSpan  *span = out->span;

	/*
	 * The table's CHECK keeps ids of other queues out, but its owner can
	 * drop it: a consumer of both queues would then complete the other
	 * queue's job of that id.
	 */
	if (JobIdQueue(DatumGetInt64(values[JC_ID])) != out->q->qno)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("table queue.q_%s holds a job whose id names another queue", out->q->name),
				 errdetail("Job " INT64_FORMAT "; its CHECK constraint q_%s$id was dropped or disabled.",
						   DatumGetInt64(values[JC_ID]), out->q->name),
				 errhint("Delete the row, and restore the constraint: drop and re-create the queue if need be.")));
	if (out->hold)
		QueueHeldAddJob(out->q->qno, values, nulls);
	/* the result's columns are the first six */
	tuplestore_putvalues(out->rsinfo->setResult, out->rsinfo->setDesc, (Datum *) values, (bool *) nulls);
	if (span->ids != NULL)
		span->ids[span->count] = values[JC_ID];
	span->count++;
	out->lease_until = DatumGetTimestampTz(values[JC_LEASE_UNTIL]);
	span->last_prio = DatumGetInt32(values[JC_PRIORITY]);
	span->last_rank = DatumGetInt64(values[JC_RANK]);
}

/*
 * In a transaction block, claimed jobs are held in memory and written back
 * at commit if still claimed then (xact/held.c).  That write is an INSERT: a
 * role that may not insert into the queue's table marks its jobs running
 * in place instead, as a claim in a transaction of its own does.
 */
static bool
may_hold(QueueInfo *q)
{
	return QueueTablePrivilege(q, ACL_INSERT);
}

/*
 * Run one claim (directly, or through SPI where storage/claimrows.c
 * cannot) and copy what it took into the result.
 */
static void
run_claim(QueueInfo *q, QueuePlanId which, Datum *args, int want, QueueLeaseClaim *lc,
		  ReturnSetInfo *rsinfo, ClaimSpan *span)
{
	bool		in_place = !IsTransactionBlock() || !may_hold(q);
	ClaimOut	out = {q, !in_place, rsinfo, span, 0};
	int			taken;

	span->held |= !in_place;
	args[1] = Int32GetDatum(want);
	taken = QueueClaimRows(q, which, in_place, args, want, lc->track, lc->on ? &lc->batch : NULL,
						   emit_job, &out);
	QueueLeaseClaimPublish(lc);
	if (taken < 0)
	{
		/*
		 * SKIP LOCKED does not tell what it passed over, and the cursor is
		 * then raised past the jobs taken.  A job locked by someone other
		 * than a claim would be left behind it, so count everything from the
		 * scan's start as passed over: a claim a second later looks there
		 * again (see QueueCursorSkipped).  PLAN_CLAIM_BELOW's scan follows
		 * PLAN_CLAIM_AT's, whose start (args 5 and 6) comes before it.
		 */
		if (which == PLAN_CLAIM_FRONT)
			QueueCursorSkipped(q->qno, PG_INT32_MAX, PG_INT64_MIN, DatumGetTimestampTz(args[4]));
		else
			QueueCursorSkipped(q->qno, DatumGetInt32(args[5]), DatumGetInt64(args[6]),
							   DatumGetTimestampTz(args[4]));

		/* see catalog/plans.c: a claim that is a transaction of its own */
		if (in_place)
			which = PLAN_IN_PLACE(which);
		QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, which), args, NULL, false, 0),
						SPI_OK_SELECT, -1, "claim jobs", q->name);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			Datum		values[JOB_NCARRIED];
			bool		nulls[JOB_NCARRIED];

			for (int c = 0; c < JC_CLAIMED_AT; c++)
				values[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1, &nulls[c]);
			values[JC_CLAIMED_AT] = args[4];
			nulls[JC_CLAIMED_AT] = false;
			emit_job(&out, values, nulls);
		}
		taken = (int) SPI_processed;
	}
	if (taken == 0)
		return;
	QueueXactCount(q->qno, JS_READY, in_place ? JS_RUNNING : JS_NONE, taken);
	/* the worker returns them when their lease runs out: tell it when */
	if (in_place)
		QueueXactLeased(q->qno, out.lease_until);
}

/*
 * Tokens of the queue's rate limit for up to want jobs (shmem/ratelimit.c);
 * span->refill_at learns when the next comes if there were fewer.
 */
static int
rate_take(QueueInfo *q, int want, TimestampTz now_ts, ClaimSpan *span)
{
	int			got = QueueRateTake(q->qno, q->rate_limit, q->rate_period_us, want, now_ts,
									&span->refill_at);

	if (got < 0 && !QueueStateActive())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("queue \"%s\" has a rate limit, which needs queue in shared_preload_libraries", q->name),
				 errhint("Add queue to shared_preload_libraries and restart, or remove the limit with queue.alter(%s, rate_limit => 0).",
						 quote_literal_cstr(q->name))));
	if (got < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("queue \"%s\" has a rate limit but no shared state to keep it in", q->name),
				 errdetail("queue.max_queues (%d) queues have shared state already.", queue_max_queues),
				 errhint("Raise queue.max_queues (it takes a restart) or drop unused queues.")));
	return got;
}

/*
 * The claim took used of the granted tokens: the rest go back.  If it used
 * them all, the bucket ran dry before the jobs may have: listeners are
 * told when it refills (a waiting claim sleeps until then, see queue_claim).
 */
static void
rate_settle(QueueInfo *q, int granted, int used, ClaimSpan *span)
{
	if (used < granted)
	{
		/* claims that found the bucket short meanwhile may use them */
		if (QueueRateGiveBack(q->qno, q->rate_limit, granted - used))
			QueueSignalTokensBack(q->qno, granted - used);
		span->refill_at = 0;
	}
	else if (span->refill_at != 0)
		QueueSignalRateRefill(q->qno, span->refill_at);
}

/*
 * One claim attempt: promote due scheduled jobs (if promote), then take up
 * to max_jobs ready ones starting at the cursor.  A rate limit's tokens
 * come first, then max_running's slots: neither is held for a job the
 * other does not allow.
 */
static void
claim_once(QueueInfo *q, Interval *lease, int max_jobs, ReturnSetInfo *rsinfo, ClaimSpan *span,
		   bool promote)
{
	TimestampTz now_ts = GetCurrentTimestamp();
	Datum		args[7];
	bool		have_cursor;
	int32		cursor_prio = 0;
	int64		cursor_rank = 0;
	int32		shared_prio;
	int64		shared_rank;
	uint64		gen = 0;
	Datum	   *slots = NULL;
	int			first = span->count;
	int			granted = 0;
	QueueLeaseClaim lc;

	if (q->rate_limit > 0)
	{
		max_jobs = granted = rate_take(q, max_jobs, now_ts, span);
		if (granted == 0)
		{
			rate_settle(q, 0, 0, span);
			return;
		}
	}

	/*
	 * With max_running, every job we take needs a free slot first.  Without
	 * one we promote nothing either: a waiting claim would keep the jobs it
	 * promoted locked, and out of everyone else's sight, while it sleeps.
	 */
	if (q->max_running > 0)
	{
		max_jobs = QueueSlotsTake(q, max_jobs, &slots);
		if (max_jobs == 0)
		{
			rate_settle(q, granted, 0, span);
			return;
		}
		span->ids = palloc(sizeof(Datum) * (first + max_jobs));
	}

	if (promote && QueuePromoteDue(q->qno, now_ts))
		(void) promote_due(q, now_ts, QUEUE_PROMOTE_BATCH);

	args[0] = IntervalPGetDatum(lease != NULL ? lease : &q->lease);
	QueueOwnerPublish();
	args[2] = Int32GetDatum(MyProcPid);
	args[3] = TimestampTzGetDatum(MyStartTimestamp);
	args[4] = TimestampTzGetDatum(now_ts);

	/* gen must be read before the claim statements take their snapshots. */
	have_cursor = QueueCursorGet(q->qno, now_ts, &cursor_prio, &cursor_rank, &gen);
	shared_prio = cursor_prio;
	shared_rank = cursor_rank;

	/*
	 * Jobs this transaction made ready (just now by promotion, or earlier)
	 * are visible to it before its commit lowers the cursor for everyone.
	 */
	if (have_cursor)
		have_cursor = QueueXactScanStart(q->qno, &cursor_prio, &cursor_rank);

	/*
	 * Keep claims starting meanwhile off the jobs we are about to take.
	 * Only a scan that starts where everyone's does, with a snapshot taken
	 * after gen was read, is sure to take every job it passes.
	 */
	if (have_cursor && !IsolationUsesXactSnapshot() &&
		cursor_prio == shared_prio && cursor_rank == shared_rank)
		QueueCursorReserve(q->qno, cursor_prio, cursor_rank, max_jobs, gen);

	/*
	 * Rows we lock become ready again if we abort, even if the claim
	 * statement itself fails halfway; claims skipping them may have moved
	 * the cursor past, so an abort lowers it to where our scan starts.
	 */
	if (have_cursor)
		QueueXactClaimed(q->qno, cursor_prio, cursor_rank, false);
	else
		QueueXactClaimed(q->qno, PG_INT32_MAX, PG_INT64_MIN, false);

	/* one lease for the whole batch, where it can be had (xact/leases.c) */
	QueueLeaseClaimBegin(&lc, q, max_jobs, now_ts,
						 DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
																 args[4], args[0])));
	if (have_cursor)
	{
		args[5] = Int32GetDatum(cursor_prio);
		args[6] = Int64GetDatum(cursor_rank);
		run_claim(q, PLAN_CLAIM_AT, args, max_jobs, &lc, rsinfo, span);
		if (span->count < max_jobs)
			run_claim(q, PLAN_CLAIM_BELOW, args, max_jobs - span->count, &lc, rsinfo, span);
	}
	else
		run_claim(q, PLAN_CLAIM_FRONT, args, max_jobs, &lc, rsinfo, span);
	(void) QueueLeaseClaimEnd(&lc);

	/*
	 * Everything before our last job is gone, or held by other claims whose
	 * rollback will lower the cursor again.  A transaction snapshot may
	 * predate gen, so only fresh snapshots may raise it.
	 */
	if (span->count > first)
		QueueXactClaimed(q->qno, span->last_prio, span->last_rank, true);
	if (span->count > 0 && !IsolationUsesXactSnapshot())
		QueueCursorAdvance(q->qno, span->last_prio, span->last_rank + 1, gen);

	if (slots != NULL)
		QueueSlotsAssign(q, slots, span->ids + first, span->count - first);
	if (granted > 0)
		rate_settle(q, granted, span->count - first, span);
}

/*
 * Whether nothing but this claim will use the statement's snapshot: a
 * plain SELECT of columns from queue.claim(...) alone, in its own
 * transaction, under READ COMMITTED.
 */
static bool
sleep_needs_no_snapshot(FunctionCallInfo fcinfo)
{
	PlannedStmt *stmt;
	RangeTblEntry *rte;
	RangeTblFunction *rtf;
	FunctionScan *fscan;
	ListCell   *lc;

	if (IsTransactionBlock() || IsolationUsesXactSnapshot() ||
		ActivePortal == NULL || list_length(ActivePortal->stmts) != 1)
		return false;
	stmt = linitial_node(PlannedStmt, ActivePortal->stmts);
	if (stmt->commandType != CMD_SELECT || list_length(stmt->rtable) != 1 ||
		!IsA(stmt->planTree, FunctionScan) || stmt->planTree->qual != NIL)
		return false;
	rte = linitial_node(RangeTblEntry, stmt->rtable);
	fscan = (FunctionScan *) stmt->planTree;
	if (rte->rtekind != RTE_FUNCTION || list_length(fscan->functions) != 1)
		return false;
	rtf = linitial_node(RangeTblFunction, fscan->functions);
	if (!IsA(rtf->funcexpr, FuncExpr) ||
		((FuncExpr *) rtf->funcexpr)->funcid != fcinfo->flinfo->fn_oid)
		return false;
	foreach(lc, stmt->planTree->targetlist)
		if (!IsA(lfirst_node(TargetEntry, lc)->expr, Var))
			return false;
	return true;
}

/*
 * Check claim's arguments max_jobs, lease and wait; returns how long to
 * wait, in ms.
 */
static int64
check_claim_args(FunctionCallInfo fcinfo)
{
	Interval   *lease = PG_ARGISNULL(2) ? NULL : PG_GETARG_INTERVAL_P(2);
	Interval	zero = {0};
	int32		max_jobs;
	double		secs;
	int64		wait_ms;

	QueueCheckNotNull(PG_ARGISNULL(1), "max_jobs", "Leave it out to claim one job.");
	max_jobs = PG_GETARG_INT32(1);
	if (max_jobs < 1 || max_jobs > QUEUE_MAX_CLAIM)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_jobs must be between 1 and %d, not %d", QUEUE_MAX_CLAIM, max_jobs),
				 errhint("Claim in batches of up to %d jobs.", QUEUE_MAX_CLAIM)));
	if (lease != NULL &&
		DatumGetBool(DirectFunctionCall2(interval_le, IntervalPGetDatum(lease),
										 IntervalPGetDatum(&zero))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease must be positive"),
				 errhint("Leave it out to use the queue's lease.")));
	if (PG_ARGISNULL(3))
		return 0;
	secs = DatumGetFloat8(DirectFunctionCall2(interval_part, CStringGetTextDatum("epoch"),
											  PG_GETARG_DATUM(3)));
	if (secs < 0 || secs > 3600)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("wait must be between 0 and 1 hour"),
				 errhint("Wait in a loop for longer; each call returns as soon as a job arrives.")));
	wait_ms = (int64) (secs * 1000.0);
	if (wait_ms > 0 && !QueueWaitActive())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("claim with wait needs queue in shared_preload_libraries"),
				 errhint("Add queue to shared_preload_libraries and restart, or poll without wait.")));
	return wait_ms;
}

/*
 * One look at the queue: claim what is due.
 *
 * Inside a transaction block the jobs we promote stay ours, locked and out
 * of everyone else's sight, until the block ends: a consumer that claimed
 * one job and worked on it for a minute hid every job that fell due with
 * it (up to QUEUE_PROMOTE_BATCH) from the other consumers for that minute.
 * There we promote only when nothing is ready, and only as many as we take
 * (the worker promotes the rest, and commits at once), unless max_running
 * makes a second attempt hold slots it does not use.  Without shared
 * memory there is no worker, and claims promote as everywhere.
 */
static void
claim_look(QueueInfo *q, Interval *lease, int max_jobs, ReturnSetInfo *rsinfo, ClaimSpan *span)
{
	bool		in_block = IsTransactionBlock() && QueueStateActive();

	if (q->paused)
		return;
	claim_once(q, lease, max_jobs, rsinfo, span, !in_block);
	/* (nor when the rate limit's bucket is empty: it would claim none) */
	if (in_block && span->count == 0 && q->max_running == 0 && span->refill_at == 0)
	{
		TimestampTz now_ts = GetCurrentTimestamp();

		if (QueuePromoteDue(q->qno, now_ts) && promote_due(q, now_ts, max_jobs) > 0)
			claim_once(q, lease, max_jobs, rsinfo, span, false);
	}
}

/*
 * Sleep until woken (wake_gen: the slot's counter when we prepared), the
 * deadline, or the queue's next scheduled job falls due.
 *
 * Wake when the queue's next scheduled job falls due, and promote it
 * ourselves (QueuePromoteDue): the worker's promotion would cost a commit
 * of its own before we were woken.  One waiting claim per queue does that
 * (QueueWaitTimed); the others are woken as it leaves.  Not one that
 * cannot promote: in a transaction block, with max_running, a claim
 * promotes nothing (see claim_once), and one of a paused queue does not
 * look (the worker promotes its jobs, as no claim can take them).  A due
 * time already past is the worker's to handle: it wakes us when that makes
 * jobs ready, and when it has found the next due time.
 */
static void
claim_sleep(QueueInfo *q, uint64 wake_gen, TimestampTz now_ts, TimestampTz deadline)
{
	TimestampTz wake_at;
	uint64		due_gen;
	bool		timed;

	if (q->paused || !QueueDueGet(q->qno, &wake_at, &due_gen))
		wake_at = 0;
	if (wake_at <= now_ts || wake_at > deadline ||
		(IsTransactionBlock() && q->max_running > 0))
	{
		QueueWaitUntimed(wake_at, now_ts);
		timed = false;
	}
	else
		timed = QueueWaitTimed(q->qno, wake_at, now_ts);
	if (!timed)
		(void) QueueWaitSleep(q->qno, wake_gen, (long) ((deadline - now_ts + 999) / 1000));
	else if (QueueWaitSleep(q->qno, wake_gen, (long) ((wake_at - now_ts) / 1000)))
	{
		/*
		 * The sleep is in whole milliseconds: the rest of the way to the
		 * due time, less than one, is slept here, so that the job is taken
		 * when it falls due rather than up to 1 ms after.
		 */
		now_ts = GetCurrentTimestamp();
		if (wake_at > now_ts)
			pg_usleep((long) (wake_at - now_ts));
	}
}

PG_FUNCTION_INFO_V1(queue_claim);
Datum
queue_claim(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	text	   *qname = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	Interval   *lease = PG_ARGISNULL(2) ? NULL : PG_GETARG_INTERVAL_P(2);
	int64		wait_ms = check_claim_args(fcinfo);
	int32		max_jobs = PG_GETARG_INT32(1);
	QueueInfo  *q;
	ClaimSpan	span = {0};
	TimestampTz deadline = 0;
	bool		unpin = false;
	bool		blind = false;

	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);

	QueueSpiBegin();
	q = QueueLookupByName(qname);
	QueueOpen(q, QUEUE_CONSUME, 0);
	QueueSyncClaimStart();
	if (wait_ms > 0)
	{
		Oid			relid = QueueTableRelid(q);

		deadline = GetCurrentTimestamp() + wait_ms * INT64CONST(1000);
		unpin = sleep_needs_no_snapshot(fcinfo);
		/* we may be woken for a job that others would take (shmem/waits.c) */
		blind = IsolationUsesXactSnapshot() ||
			(OidIsValid(relid) && check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED);
		/* the worker leaves due jobs to waiters, but not to these */
		if (!IsTransactionBlock())
			QueueWaitBegin(q->qno);
	}

	for (;;)
	{
		uint64		wake_gen = 0;
		TimestampTz now_ts;

		if (wait_ms > 0)
			wake_gen = QueueWaitPrepare(q->qno, blind);
		span.refill_at = 0;
		claim_look(q, lease, max_jobs, rsinfo, &span);
		if (span.count > 0 || wait_ms == 0)
			break;
		now_ts = GetCurrentTimestamp();
		if (now_ts >= deadline)
			break;
		if (unpin)
		{
			/* Our snapshots are all used up; see sleep_needs_no_snapshot. */
			InvalidateCatalogSnapshot();
			MyProc->xmin = InvalidTransactionId;
		}
		/* an empty bucket: look again when its next token comes */
		if (span.refill_at == 0 || span.refill_at > now_ts)
			claim_sleep(q, wake_gen, now_ts,
						span.refill_at != 0 ? Min(deadline, span.refill_at) : deadline);

		/*
		 * The queue may have been paused, resumed or dropped meanwhile.
		 * A resume wakes us before its change reaches our cache (commit
		 * callbacks run before invalidations are sent): a paused queue's
		 * settings are read again whatever the cache says.
		 */
		if (q->paused)
			QueueCacheForget();
		q = QueueLookupByName(qname);
	}
	if (wait_ms > 0)
		QueueWaitDone();
	if (span.count < max_jobs)
		QueueSignalClaimShort(q->qno);
	QueueSyncClaimEnd(span.held);

	QueueSpiEnd();
	return (Datum) 0;
}
