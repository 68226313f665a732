/*-------------------------------------------------------------------------
 *
 * fire.c
 *	  Firing the due ticks of schedules: one job per tick, enqueued in the
 *	  transaction that moves the schedule's next_run_at past the tick.
 *
 * The background worker fires them (worker/schedules.c), or queue.tick()
 * where there is none.  Rows are taken FOR UPDATE SKIP LOCKED, so two
 * firers never fire one tick twice, and a tick whose transaction did not
 * commit (a crash, a failover before it reached the standby) was never
 * fired: whoever comes next fires it.  Each schedule fires in a
 * subtransaction of its own, so that one whose job cannot be enqueued (a
 * trigger of the queue's owner raised an error, say) is tried again later
 * — after 1 s, doubling to 1 min — and the others go on.
 *
 * Jobs are enqueued through queue.enqueue as whoever fires: the worker, or
 * the caller of queue.tick(), whose privilege to produce into the queue
 * decides which schedules it fires; the schedules' table is read and
 * written as its owner.  A job's run_at is the time of its tick.
 *
 * A tick reached more than MISSED_AFTER late (the server was down, or
 * nothing fired ticks) was missed: catch_up 'none' enqueues nothing for
 * missed ticks, 'one' a single job for the latest of them, 'all' one job
 * for each (at most FIRE_PER_PASS of one schedule per pass).  Later ticks
 * each get their job.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "base/errors.h"
#include "base/role.h"
#include "base/settings.h"
#include "catalog/acl.h"
#include "catalog/cache.h"
#include "catalog/plans.h"
#include "catalog/spi.h"
#include "ops/schedule.h"
#include "xact/pending.h"

#define MISSED_AFTER	(60 * USECS_PER_SEC)
#define FIRE_PER_PASS	100
#define RETRY_MAX_SECS	60
#define HELD_RETRY_MS	1000	/* a due schedule another transaction holds */
#define PASS_BUDGET_MS	200		/* the worker's pass commits after this */

typedef enum CatchUp
{
	CATCH_UP_NONE,
	CATCH_UP_ONE,
	CATCH_UP_ALL
} CatchUp;

/* A due schedule's row, and what firing it decided. */
typedef struct DueSchedule
{
	Datum		name;			/* text */
	int32		qno;
	QueueInfo  *q;				/* looked up when it fires */
	Datum		cron;			/* text, or 0 */
	Datum		every;			/* interval, or 0 */
	Datum		timezone;		/* text */
	ScheduleTiming timing;		/* made of them when it fires */
	Datum		payload;		/* jsonb */
	int32		priority;
	Datum		group_key;		/* text, or 0 */
	bool		skip_overlap;
	CatchUp		catch_up;
	TimestampTz next_run_at;
	int64		last_job_id;
	int32		failures;
	TimestampTz ticks[FIRE_PER_PASS];	/* to fire, in order */
	int			nticks;
	TimestampTz next;			/* after them */
} DueSchedule;

static bool firing = false;

/* The latest tick at or before limit, starting from tick t <= limit. */
static TimestampTz
latest_tick_upto(const ScheduleTiming *timing, TimestampTz t, TimestampTz limit)
{
	static const int64 windows[] = {60, 3600, 86400, 32 * 86400, 367 * 86400, 40 * 367 * 86400};
	TimestampTz u;

	/* jump to a tick in the shortest window before limit that has one */
	for (int i = 0; i < (int) lengthof(windows); i++)
	{
		TimestampTz from = limit - windows[i] * USECS_PER_SEC;

		if (from <= t)
			break;
		u = ScheduleTickAfter(timing, t, from);
		if (u <= limit)
		{
			t = u;
			break;
		}
	}
	while ((u = ScheduleTickAfter(timing, t, t)) <= limit)
		t = u;
	return t;
}

/* Which of s's ticks to fire now, and its next tick after them. */
static void
plan_ticks(DueSchedule *s, TimestampTz now_ts)
{
	TimestampTz t = s->next_run_at;
	TimestampTz missed_limit = now_ts - MISSED_AFTER;

	s->nticks = 0;
	if (s->catch_up != CATCH_UP_ALL && t < missed_limit)
	{
		TimestampTz latest = latest_tick_upto(&s->timing, t, missed_limit);

		ereport(LOG,
				(errmsg("schedule \"%s\" missed its ticks from %s to %s", TextDatumGetCString(s->name),
						timestamptz_to_str(t), timestamptz_to_str(latest)),
				 errdetail(s->catch_up == CATCH_UP_ONE ? "One job stands for them (catch_up 'one')." :
						   "They get no job (catch_up 'none').")));
		if (s->catch_up == CATCH_UP_ONE)
			s->ticks[s->nticks++] = latest;
		t = ScheduleTickAfter(&s->timing, latest, latest);
	}
	while (t <= now_ts && s->nticks < FIRE_PER_PASS)
	{
		s->ticks[s->nticks++] = t;
		t = ScheduleTickAfter(&s->timing, t, t);
	}
	s->next = t;
}

/*
 * The due schedule in row of the due-schedules query, as it is: what
 * could fail (its queue, its timing) is made of it when it fires, so that
 * one bad row fails alone.
 */
static void
read_due(HeapTuple row, TupleDesc desc, DueSchedule *s)
{
	bool		isnull;

	s->name = SPI_getbinval(row, desc, 1, &isnull);
	s->qno = DatumGetInt32(SPI_getbinval(row, desc, 2, &isnull));
	s->cron = SPI_getbinval(row, desc, 3, &isnull);
	if (isnull)
		s->cron = (Datum) 0;
	s->every = SPI_getbinval(row, desc, 4, &isnull);
	if (isnull)
		s->every = (Datum) 0;
	s->timezone = SPI_getbinval(row, desc, 5, &isnull);
	s->payload = SPI_getbinval(row, desc, 6, &isnull);
	s->priority = DatumGetInt32(SPI_getbinval(row, desc, 7, &isnull));
	s->group_key = SPI_getbinval(row, desc, 8, &isnull);
	if (isnull)
		s->group_key = (Datum) 0;
	s->skip_overlap = strcmp(TextDatumGetCString(SPI_getbinval(row, desc, 9, &isnull)), "skip") == 0;
	s->catch_up = (CatchUp) DatumGetInt32(SPI_getbinval(row, desc, 10, &isnull));
	s->next_run_at = DatumGetTimestampTz(SPI_getbinval(row, desc, 11, &isnull));
	s->last_job_id = DatumGetInt64(SPI_getbinval(row, desc, 12, &isnull));
	if (isnull)
		s->last_job_id = 0;
	s->failures = DatumGetInt32(SPI_getbinval(row, desc, 13, &isnull));
}

/* A statement kept for the life of the backend. */
static SPIPlanPtr
saved_plan(SPIPlanPtr *plan, const char *sql, int nargs, Oid *types)
{
	if (*plan == NULL)
	{
		SPIPlanPtr	p = SPI_prepare(sql, nargs, types);

		if (p == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("could not prepare a statement on the schedules' table"),
					 errdetail("%s: %s", SPI_result_code_string(SPI_result), sql),
					 errhint("The extension's tables were changed by hand; reinstall the extension.")));
		SPI_keepplan(p);
		*plan = p;
	}
	return *plan;
}

/* Enqueue the job of one tick; returns its id. */
static int64
enqueue_tick(DueSchedule *s, TimestampTz tick)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[5] = {TEXTOID, JSONBOID, TIMESTAMPTZOID, INT4OID, TEXTOID};
	Datum		values[5];
	char		nulls[5] = "     ";
	bool		isnull;

	values[0] = CStringGetTextDatum(s->q->name);
	values[1] = s->payload;
	values[2] = TimestampTzGetDatum(tick);
	values[3] = Int32GetDatum(s->priority);
	values[4] = s->group_key;
	nulls[4] = s->group_key != 0 ? ' ' : 'n';
	QueueCheckSpi(SPI_execute_plan(saved_plan(&plan, "SELECT queue.enqueue($1, $2, $3, NULL, $4, $5)",
											  5, types), values, nulls, false, 1),
				  SPI_OK_SELECT, 1, "enqueue a schedule's job", s->q->name);
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Whether s's last job is unfinished (not done, cancelled or dead): a row
 * of its queue's table in another state.  Read as the queue's owner, in
 * the table itself: nothing a producer can enqueue makes it so.
 */
static bool
last_job_unfinished(DueSchedule *s)
{
	Datum		id = Int64GetDatum(s->last_job_id);
	QueueAsRole as;
	bool		isnull;
	bool		unfinished;

	if (s->last_job_id == 0)
		return false;
	QueueAsRoleInScopeBegin(&as, QueueOwner(s->q));
	QueueCheckSpi(SPI_execute_plan(QueueGetPlan(s->q, PLAN_STATE), &id, NULL, true, 1),
				  SPI_OK_SELECT, -1, "look up a schedule's last job", s->q->name);
	unfinished = SPI_processed == 1 &&
		strcmp(TextDatumGetCString(QueuePlanValue(PLAN_STATE, 0, "state", &isnull)), "dead") != 0;
	QueueAsRoleEnd(&as);
	return unfinished;
}

/* Run a statement on the schedules' table, as its owner. */
static void
as_table_owner(SPIPlanPtr plan, Datum *values, const char *nulls, int expected)
{
	QueueAsRole as;

	QueueAsRoleInScopeBegin(&as, QueueRelOwner(QueueSchedulesRelid(), "queue_schedules"));
	QueueCheckSpi(SPI_execute_plan(plan, values, nulls, false, 0), expected, -1, "fire a schedule",
				  "queue_schedules");
	QueueAsRoleEnd(&as);
}

/* Enqueue s's planned ticks and move it on; returns the jobs enqueued. */
static int
fire_ticks(DueSchedule *s)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[5] = {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID, INT8OID};
	Datum		values[5];
	char		nulls[5] = "     ";
	int			jobs = 0;
	int64		skips = 0;
	TimestampTz last_run = 0;

	for (int i = 0; i < s->nticks; i++)
	{
		if (s->skip_overlap && last_job_unfinished(s))
		{
			skips++;
			continue;
		}
		s->last_job_id = enqueue_tick(s, s->ticks[i]);
		last_run = s->ticks[i];
		jobs++;
	}
	values[0] = s->name;
	values[1] = TimestampTzGetDatum(s->next);
	values[2] = TimestampTzGetDatum(last_run);
	nulls[2] = last_run != 0 ? ' ' : 'n';
	values[3] = Int64GetDatum(s->last_job_id);
	nulls[3] = jobs > 0 ? ' ' : 'n';
	values[4] = Int64GetDatum(skips);
	as_table_owner(saved_plan(&plan, "UPDATE queue.queue_schedules SET next_run_at = $2,"
							  " last_run_at = coalesce($3, last_run_at), last_job_id = coalesce($4, last_job_id),"
							  " overlap_skips = overlap_skips + $5, retry_at = NULL, failures = 0, last_error = NULL"
							  " WHERE name OPERATOR(pg_catalog.=) $1", 5, types),
				   values, nulls, SPI_OK_UPDATE);
	return jobs;
}

/* s could not fire: try again later, and say why. */
static void
fire_failed(DueSchedule *s, ErrorData *edata)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[3] = {TEXTOID, TIMESTAMPTZOID, TEXTOID};
	Datum		values[3];
	int			secs = s->failures >= 6 ? RETRY_MAX_SECS : Min(1 << s->failures, RETRY_MAX_SECS);

	ereport(WARNING,
			(errmsg("could not fire schedule \"%s\" of queue %s: %s", TextDatumGetCString(s->name),
					s->q != NULL ? psprintf("\"%s\"", s->q->name) : psprintf("number %d", s->qno),
					edata->message),
			 errhint("Its tick is tried again in %d s; queue.schedules shows the error.", secs)));
	values[0] = s->name;
	values[1] = TimestampTzGetDatum(GetCurrentTimestamp() + secs * USECS_PER_SEC);
	values[2] = CStringGetTextDatum(edata->message);
	as_table_owner(saved_plan(&plan, "UPDATE queue.queue_schedules SET retry_at = $2, failures = failures + 1,"
							  " last_error = $3 WHERE name OPERATOR(pg_catalog.=) $1", 3, types),
				   values, NULL, SPI_OK_UPDATE);
}

/* What fire_one's subtransaction does, and learns. */
typedef struct FireCall
{
	DueSchedule *s;
	bool		from_worker;
	TimestampTz now_ts;
	int			jobs;
} FireCall;

static void
fire_in_subxact(void *arg)
{
	FireCall   *c = (FireCall *) arg;
	DueSchedule *s = c->s;

	s->q = QueueLookupByQno(s->qno, false);
	ScheduleTimingMake(s->cron != 0 ? TextDatumGetCString(s->cron) : NULL,
					   s->every != 0 ? DatumGetIntervalP(s->every) : NULL,
					   TextDatumGetCString(s->timezone), &s->timing);
	plan_ticks(s, c->now_ts);
	if (c->from_worker)
		QueueOwnerTimeoutBegin();
	c->jobs = fire_ticks(s);
	if (c->from_worker)
		QueueOwnerTimeoutCheck("firing the tick");
}

/*
 * Fire s's due ticks, in a subtransaction; the worker bounds the time the
 * queue owner's code (triggers on its tables) may take, as in its upkeep.
 * Returns the jobs enqueued.
 */
static int
fire_one(DueSchedule *s, bool from_worker, TimestampTz now_ts)
{
	FireCall	c = {s, from_worker, now_ts, 0};
	ErrorData  *edata = QueueRunInSubxact(fire_in_subxact, &c);

	if (edata == NULL)
		return c.jobs;
	/* the timeout's cancel says "user request" */
	if (from_worker && edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
		edata->message = pstrdup("firing the tick took longer than queue.upkeep_timeout");
	fire_failed(s, edata);
	FreeErrorData(edata);
	return 0;
}

/*
 * The queues whose schedules a role other than a superuser fires: those
 * it may produce into (an int[]).
 */
static Datum
producible_queues(Oid caller)
{
	static SPIPlanPtr plan = NULL;
	QueueAsRole as;
	Datum	   *qnos;
	int			n = 0;

	QueueAsRoleInScopeBegin(&as, QueueRelOwner(QueueSchedulesRelid(), "queue_schedules"));
	QueueCheckSpi(SPI_execute_plan(saved_plan(&plan, "SELECT DISTINCT qno FROM queue.queue_schedules", 0, NULL),
								   NULL, NULL, true, 0), SPI_OK_SELECT, -1, "list schedules", "queue_schedules");
	QueueAsRoleEnd(&as);
	qnos = palloc(sizeof(Datum) * (SPI_processed + 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int32		qno = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		QueueInfo  *q = QueueLookupByQno(qno, true);

		if (q != NULL && QueueMay(q, caller, QUEUE_PRODUCE))
			qnos[n++] = Int32GetDatum(qno);
	}
	return PointerGetDatum(construct_array(qnos, n, INT4OID, sizeof(int32), true, TYPALIGN_INT));
}

/* Lock up to limit due schedules (of queues qnos, if not 0). */
static SPITupleTable *
lock_due(int limit, Datum qnos, TimestampTz now_ts)
{
	static SPIPlanPtr plan = NULL;
	Oid			types[3] = {TIMESTAMPTZOID, INT4OID, INT4ARRAYOID};
	Datum		values[3] = {TimestampTzGetDatum(now_ts), Int32GetDatum(limit), qnos};
	char		nulls[3] = {' ', ' ', qnos != 0 ? ' ' : 'n'};

	as_table_owner(saved_plan(&plan,
							  "SELECT name, qno, cron, every, timezone, payload, priority, group_key, overlap,"
							  " CASE catch_up WHEN 'none' THEN 0 WHEN 'one' THEN 1 ELSE 2 END,"
							  " next_run_at, last_job_id, failures FROM queue.queue_schedules"
							  " WHERE NOT paused AND coalesce(retry_at, next_run_at) <= $1"
							  " AND ($3 IS NULL OR qno = ANY ($3))"
							  " ORDER BY coalesce(retry_at, next_run_at) LIMIT $2 FOR UPDATE SKIP LOCKED",
							  3, types), values, nulls, SPI_OK_SELECT);
	return SPI_tuptable;
}

/*
 * When to look at the schedules again, after a pass that started at
 * now_ts: when the next falls due (0 if none does), or, if one is due
 * still (*due_left: another transaction holds its row, as an open
 * queue.tick() or pause_schedule() does, or it has more ticks to catch
 * up), a while from now rather than at once.
 */
static TimestampTz
next_look(TimestampTz now_ts, bool *due_left)
{
	static SPIPlanPtr plan = NULL;
	Oid			type = TIMESTAMPTZOID;
	Datum		value = TimestampTzGetDatum(now_ts);
	bool		isnull;
	Datum		later;

	as_table_owner(saved_plan(&plan,
							  "SELECT (SELECT min(coalesce(retry_at, next_run_at)) FROM queue.queue_schedules"
							  "         WHERE NOT paused AND coalesce(retry_at, next_run_at) > $1),"
							  " EXISTS (SELECT FROM queue.queue_schedules"
							  "          WHERE NOT paused AND coalesce(retry_at, next_run_at) <= $1)",
							  1, &type), &value, NULL, SPI_OK_SELECT);
	later = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull || TIMESTAMP_NOT_FINITE(DatumGetTimestampTz(later)))
		later = (Datum) 0;
	*due_left = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	if (*due_left)
	{
		TimestampTz retry = now_ts + HELD_RETRY_MS * INT64CONST(1000);

		if (later == 0 || retry < DatumGetTimestampTz(later))
			return retry;
	}
	return DatumGetTimestampTz(later);
}

/*
 * Fire the due ticks of up to limit schedules (not from the worker: of
 * the queues the caller may produce into).  Returns whether to go on at
 * once: more may be due, or the worker's pass ran out of time.  *jobs
 * counts the jobs enqueued, *next is when to look again (0: no schedule is
 * due ever).
 */
bool
QueueFireSchedules(int limit, bool from_worker, int64 *jobs, TimestampTz *next)
{
	SPITupleTable *due;
	Oid			caller = GetUserId();
	TimestampTz now_ts = GetCurrentTimestamp();
	int			ndue;
	int			nfired = 0;
	bool		due_left;

	*next = 0;
	if (!OidIsValid(QueueSchedulesRelid()))
		return false;			/* the installed SQL is older than 0.5 */
	QueueSpiBegin();
	due = lock_due(limit, from_worker || superuser_arg(caller) ? 0 : producible_queues(caller), now_ts);
	ndue = (int) due->numvals;
	firing = true;
	PG_TRY();
	{
		/* the worker commits what it fired once a pass has taken long */
		while (nfired < ndue &&
			   (!from_worker || GetCurrentTimestamp() - now_ts < PASS_BUDGET_MS * INT64CONST(1000)))
		{
			DueSchedule *s = palloc0(sizeof(DueSchedule));

			read_due(due->vals[nfired++], due->tupdesc, s);
			*jobs += fire_one(s, from_worker, now_ts);
			pfree(s);
		}
	}
	PG_FINALLY();
	{
		firing = false;
	}
	PG_END_TRY();
	*next = next_look(now_ts, &due_left);
	QueueSpiEnd();
	/* due ones left after a pass that fired some may be ours to go on with */
	return nfired < ndue || ndue == limit || (due_left && ndue > 0);
}

/*
 * queue._fire_schedules(): queue.tick()'s part, the due ticks of every
 * schedule the caller fires; returns the jobs enqueued.
 */
PG_FUNCTION_INFO_V1(queue_fire_schedules);
Datum
queue_fire_schedules(PG_FUNCTION_ARGS)
{
	int64		jobs = 0;
	TimestampTz next;

	while (QueueFireSchedules(SCHEDULES_PER_PASS, false, &jobs, &next))
		CHECK_FOR_INTERRUPTS();
	/* a tick fired in a transaction that commits asynchronously could be fired again */
	if (jobs > 0 && synchronous_commit == SYNCHRONOUS_COMMIT_OFF)
		(void) set_config_option("synchronous_commit", "local", PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
	PG_RETURN_INT64(jobs);
}

/*
 * After a statement that changed schedules: the worker looks at them
 * again once the transaction commits.  Not while ticks are being fired:
 * whoever fires them learns the next due time itself.
 */
PG_FUNCTION_INFO_V1(queue_schedules_changed);
Datum
queue_schedules_changed(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("queue._schedules_changed() must be called as a trigger")));
	if (!firing)
		QueueXactSchedulesChanged();
	return PointerGetDatum(NULL);
}
