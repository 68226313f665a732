/*-------------------------------------------------------------------------
 *
 * schedule.c
 *	  Periodic jobs: queue.schedule, unschedule, pause_schedule,
 *	  resume_schedule and cron_ticks, and when a schedule ticks.
 *
 * A schedule is a row of queue.queue_schedules, a table of the extension
 * (dumped with its data) that no role but its owner may touch: the
 * functions here check the caller's privilege on the schedule's queue
 * (manage, as for the queue's other settings, and for making one also
 * produce, since its ticks are jobs) and then work on the table as its
 * owner.  Its ticks are fired by ops/fire.c.  A schedule's name is
 * its key across queues; replacing one on another queue needs manage on
 * both.
 *
 * Cron ticks follow the wall clock of the schedule's time zone
 * (base/cron.c says what happens when daylight saving time begins and
 * ends); an interval counts elapsed time from the first tick, which is
 * one interval after the schedule was made.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "base/errors.h"
#include "catalog/acl.h"
#include "catalog/spi.h"
#include "ops/enqueue.h"
#include "ops/schedule.h"

#define SCHEDULE_NAME_MAX	128
#define EVERY_MAX			(INT64CONST(10) * 366 * USECS_PER_DAY)
#define CRON_TICKS_MAX		1000

/* Names are keys, shown in views and logs: printable and short. */
static const char *
schedule_name(FunctionCallInfo fcinfo, int arg)
{
	const char *name;
	int			len;
	bool		ok;

	QueueCheckNotNull(PG_ARGISNULL(arg), "schedule name", "Pass a name such as 'nightly-report'.");
	name = text_to_cstring(PG_GETARG_TEXT_PP(arg));
	len = strlen(name);
	ok = len >= 1 && len <= SCHEDULE_NAME_MAX;
	for (int i = 0; ok && i < len; i++)
		ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
			(name[i] >= '0' && name[i] <= '9') || strchr("_-.:/", name[i]) != NULL;
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("invalid schedule name \"%s\"", name),
				 errdetail("Schedule names are 1 to %d letters, digits and the characters _ - . : /",
						   SCHEDULE_NAME_MAX),
				 errhint("Choose a name such as 'daily-sms' or 'billing:eu'.")));
	return name;
}

static void
every_error(const char *message, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s", message),
			 errhint("%s", hint)));
}

/* every, in microseconds: a fixed length from 1 second to 10 years. */
static int64
every_length(Interval *every, const char *tzname)
{
	int64		len;

	if (every->month != 0)
		every_error("every must be a fixed length of time, not months or years",
					"For calendar schedules, such as the first of every month, use cron => '0 0 1 * *'.");
	if (pg_strcasecmp(tzname, "UTC") != 0)
		every_error("timezone applies to cron schedules only",
					"every counts elapsed time; for a time of day in a time zone use cron, "
					"for example cron => '0 9 * * *'.");
	if (every->day < 0 || every->day > EVERY_MAX / USECS_PER_DAY)
		len = -1;
	else
		len = every->day * USECS_PER_DAY + every->time;
	if (len < USECS_PER_SEC || len > EVERY_MAX)
		every_error(psprintf("every must be between 1 second and 10 years, not %s",
							 DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(every)))),
					"Pass an interval such as '30 seconds' or '1 hour'.");
	return len;
}

/*
 * When a schedule ticks, from exactly one of cron and every (the other
 * NULL), checked: an error says what is wrong.
 */
void
ScheduleTimingMake(const char *cron, Interval *every, const char *tzname, ScheduleTiming *timing)
{
	memset(timing, 0, sizeof(*timing));
	if ((cron == NULL) == (every == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg(cron == NULL ? "a schedule needs cron or every" : "cron and every cannot both be given"),
				 errhint("Pass cron => '0 9 * * *' for times of day, or every => '5 minutes' for an interval.")));
	if (tzname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("timezone must not be null"),
				 errhint("Leave it out for UTC, or pass a name such as 'Europe/Berlin'.")));
	if (every != NULL)
	{
		timing->every = every_length(every, tzname);
		return;
	}
	timing->is_cron = true;
	CronParse(cron, &timing->cron);
	timing->tz = strlen(tzname) < TZ_STRLEN_MAX ? pg_tzset(tzname) : NULL;
	if (timing->tz == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time zone \"%s\" is not known", tzname),
				 errhint("Use a name from pg_timezone_names, such as 'Europe/Berlin' or 'UTC'.")));
}

/*
 * The schedule's first tick after after; tick is one of its ticks (an
 * interval's ticks are tick plus multiples of it).  DT_NOEND if there is
 * none before the end of time.
 */
TimestampTz
ScheduleTickAfter(const ScheduleTiming *timing, TimestampTz tick, TimestampTz after)
{
	int64		k;

	if (timing->is_cron)
		return CronNext(&timing->cron, after, timing->tz);
	/* the smallest k with tick + k * every > after (floor division) */
	k = (after - tick) / timing->every;
	if ((after - tick) % timing->every < 0)
		k--;
	k++;
	if (k > 0 && tick > DT_NOEND - k * timing->every)
		return DT_NOEND;
	return tick + k * timing->every;
}

/* queue.queue_schedules, or InvalidOid when the installed SQL has none. */
Oid
QueueSchedulesRelid(void)
{
	Oid			nsp = get_namespace_oid("queue", true);

	return OidIsValid(nsp) ? get_relname_relid("queue_schedules", nsp) : InvalidOid;
}

/* The canonical name of a time zone ScheduleTimingMake accepted. */
static const char *
timing_tzname(const ScheduleTiming *timing)
{
	return timing->is_cron ? pg_get_timezone_name(timing->tz) : "UTC";
}

static bool
text_arg_is(FunctionCallInfo fcinfo, int arg, const char *what, const char *const *allowed, int n)
{
	const char *value;

	QueueCheckNotNull(PG_ARGISNULL(arg), what, psprintf("Leave it out for '%s'.", allowed[0]));
	value = text_to_cstring(PG_GETARG_TEXT_PP(arg));
	for (int i = 0; i < n; i++)
		if (strcmp(value, allowed[i]) == 0)
			return true;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s must be %s, not \"%s\"", what,
					n == 2 ? "'allow' or 'skip'" : "'none', 'one' or 'all'", value),
			 errhint(n == 2 ? "'skip' enqueues no job while the schedule's last one is unfinished." :
					 "catch_up says what ticks missed by more than a minute get: "
					 "no job, one job for them all, or a job each.")));
	return false;
}

/* The arguments of queue.schedule after name and queue, checked. */
static void
check_schedule_args(FunctionCallInfo fcinfo, ScheduleTiming *timing)
{
	static const char *const overlaps[] = {"allow", "skip"};
	static const char *const catch_ups[] = {"one", "none", "all"};

	QueueCheckNotNull(PG_ARGISNULL(3), "payload", "Pass a JSON object, '{}' if the job needs no data.");
	QueueCheckPayload(PG_GETARG_JSONB_P(3), -1);
	ScheduleTimingMake(PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2)),
					   PG_ARGISNULL(4) ? NULL : PG_GETARG_INTERVAL_P(4),
					   PG_ARGISNULL(5) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(5)), timing);
	QueueCheckNotNull(PG_ARGISNULL(6), "priority", "Leave it out for the default priority 0.");
	QueueCheckKey("group_key", PG_ARGISNULL(7) ? NULL : PG_GETARG_TEXT_PP(7));
	(void) text_arg_is(fcinfo, 8, "overlap", overlaps, 2);
	(void) text_arg_is(fcinfo, 9, "catch_up", catch_ups, 3);
}

static void
check_spi(int ret, int expected, const char *what)
{
	QueueCheckSpi(ret, expected, -1, what, "queue_schedules");
}

/* An SPI parameter from argument arg. */
static void
set_arg(FunctionCallInfo fcinfo, int arg, Datum *value, char *null)
{
	*null = PG_ARGISNULL(arg) ? 'n' : ' ';
	*value = PG_ARGISNULL(arg) ? (Datum) 0 : PG_GETARG_DATUM(arg);
}

/*
 * Insert or update schedule name (its row locked, if there was one) with
 * queue.schedule's arguments; its next tick stays if its timing does.
 * Returns the next tick.
 */
static TimestampTz
store_schedule(FunctionCallInfo fcinfo, const char *name, QueueInfo *q, const ScheduleTiming *timing,
			   bool exists, bool same_timing, TimestampTz old_next)
{
	Oid			types[11] = {TEXTOID, INT4OID, TEXTOID, INTERVALOID, TEXTOID, JSONBOID, INT4OID,
	TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[11];
	char		nulls[11] = "           ";
	TimestampTz now_ts = GetCurrentTimestamp();
	TimestampTz next = same_timing ? old_next : ScheduleTickAfter(timing, now_ts, now_ts);

	values[0] = CStringGetTextDatum(name);
	values[1] = Int32GetDatum(q->qno);
	set_arg(fcinfo, 2, &values[2], &nulls[2]);	/* cron */
	set_arg(fcinfo, 4, &values[3], &nulls[3]);	/* every */
	values[4] = CStringGetTextDatum(timing_tzname(timing));
	set_arg(fcinfo, 3, &values[5], &nulls[5]);	/* payload */
	set_arg(fcinfo, 6, &values[6], &nulls[6]);	/* priority */
	set_arg(fcinfo, 7, &values[7], &nulls[7]);	/* group_key */
	set_arg(fcinfo, 8, &values[8], &nulls[8]);	/* overlap */
	set_arg(fcinfo, 9, &values[9], &nulls[9]);	/* catch_up */
	values[10] = TimestampTzGetDatum(next);
	if (exists)
		check_spi(SPI_execute_with_args("UPDATE queue.queue_schedules SET qno = $2, cron = $3, every = $4,"
										" timezone = $5, payload = $6, priority = $7, group_key = $8,"
										" overlap = $9, catch_up = $10, next_run_at = $11,"
										" retry_at = NULL, failures = 0, last_error = NULL"
										" WHERE name OPERATOR(pg_catalog.=) $1",
										11, types, values, nulls, false, 0), SPI_OK_UPDATE, "update a schedule");
	else
		check_spi(SPI_execute_with_args("INSERT INTO queue.queue_schedules (name, qno, cron, every, timezone,"
										" payload, priority, group_key, overlap, catch_up, next_run_at)"
										" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
										" ON CONFLICT (name) DO NOTHING",
										11, types, values, nulls, false, 0), SPI_OK_INSERT, "add a schedule");
	return SPI_processed == 1 ? next : 0;
}

/* Whether the stored row's timing (columns 2-4 of the lookup) is this. */
static bool
timing_unchanged(HeapTuple row, TupleDesc desc, FunctionCallInfo fcinfo, const ScheduleTiming *timing)
{
	bool		null_cron,
				null_every,
				null_tz;
	Datum		cron = SPI_getbinval(row, desc, 2, &null_cron);
	Datum		every = SPI_getbinval(row, desc, 3, &null_every);
	Datum		tz = SPI_getbinval(row, desc, 4, &null_tz);

	if (null_cron != PG_ARGISNULL(2) || null_every != PG_ARGISNULL(4) || null_tz)
		return false;
	if (!null_cron && strcmp(TextDatumGetCString(cron), TextDatumGetCString(PG_GETARG_DATUM(2))) != 0)
		return false;
	if (!null_every && !DatumGetBool(DirectFunctionCall2(interval_eq, every, PG_GETARG_DATUM(4))))
		return false;
	return strcmp(TextDatumGetCString(tz), timing_tzname(timing)) == 0;
}

/*
 * The row of schedule name: its queue number (0 if there is none) and, if
 * wanted, its tuple; with lock, locked.  A row is locked only once the
 * caller was found to have a privilege on its queue: a lock held by
 * someone without one would keep the schedule from firing.
 */
static int32
find_schedule(const char *name, bool lock, HeapTuple *row, TupleDesc *desc)
{
	Oid			type = TEXTOID;
	Datum		value = CStringGetTextDatum(name);
	bool		isnull;

	check_spi(SPI_execute_with_args(lock ?
									"SELECT qno, cron, every, timezone, next_run_at, paused FROM queue.queue_schedules"
									" WHERE name OPERATOR(pg_catalog.=) $1 FOR UPDATE" :
									"SELECT qno FROM queue.queue_schedules WHERE name OPERATOR(pg_catalog.=) $1",
									1, &type, &value, NULL, false, 1), SPI_OK_SELECT, "look up a schedule");
	if (SPI_processed == 0)
		return 0;
	if (row != NULL)
	{
		*row = SPI_tuptable->vals[0];
		*desc = SPI_tuptable->tupdesc;
	}
	return DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* An error unless the caller may manage the queue a schedule is on. */
static void
check_may_replace(const char *name, int32 qno)
{
	QueueInfo  *q = QueueLookupByQno(qno, false);

	if (!QueueMay(q, QueueSpiCaller(), QUEUE_MANAGE))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("schedule \"%s\" belongs to a queue the role may not manage", name),
				 errhint("Choose another name for the schedule.")));
}

/*
 * queue.schedule(name, queue, cron, payload, every, timezone, priority,
 * group_key, overlap, catch_up): make or replace a schedule; returns its
 * next tick.  Replacing keeps the next tick unless cron, every or
 * timezone changed, and whether it is paused.
 */
PG_FUNCTION_INFO_V1(queue_schedule);
Datum
queue_schedule(PG_FUNCTION_ARGS)
{
	const char *name = schedule_name(fcinfo, 0);
	ScheduleTiming timing;
	QueueInfo  *q;
	TimestampTz next = 0;

	check_schedule_args(fcinfo, &timing);
	QueueSpiBegin();
	q = QueueLookupByName(PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1));
	/* its ticks are jobs the caller makes the queue take */
	QueueOpen(q, QUEUE_PRODUCE, 0);
	QueueOpen(q, QUEUE_MANAGE, 0);
	QueueRunAsCatalogOwner();
	/* a concurrent change of the same name: the next look finds its row */
	for (int i = 0; next == 0 && i < 3; i++)
	{
		HeapTuple	row;
		TupleDesc	desc;
		int32		old_qno = find_schedule(name, false, NULL, NULL);
		bool		same = false;
		TimestampTz old_next = 0;

		if (old_qno != 0 && old_qno != q->qno)
			check_may_replace(name, old_qno);
		if (old_qno != 0 && find_schedule(name, true, &row, &desc) != old_qno)
			continue;
		if (old_qno != 0)
		{
			bool		isnull;

			same = timing_unchanged(row, desc, fcinfo, &timing);
			old_next = DatumGetTimestampTz(SPI_getbinval(row, desc, 5, &isnull));
		}
		next = store_schedule(fcinfo, name, q, &timing, old_qno != 0, same, old_next);
	}
	if (next == 0)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("schedule \"%s\" was changed concurrently", name),
				 errhint("Retry the transaction.")));
	QueueSpiEnd();
	PG_RETURN_TIMESTAMPTZ(next);
}

/*
 * The schedule named by argument 0, locked, if the caller may manage its
 * queue: its queue number (and, if wanted, its row as find_schedule reads
 * it), or 0 if missing_ok and there is no such schedule.  To a role that may neither read nor manage its queue, a
 * schedule does not exist.  Runs the rest of the scope as the owner of
 * the table.
 */
static int32
open_schedule(FunctionCallInfo fcinfo, bool missing_ok, HeapTuple *row, TupleDesc *desc)
{
	const char *name = schedule_name(fcinfo, 0);
	int32		qno;
	QueueInfo  *q = NULL;

	QueueRunAsCatalogOwner();
	qno = find_schedule(name, false, NULL, NULL);
	if (qno != 0)
		q = QueueLookupByQno(qno, true);
	if (q == NULL || !QueueMay(q, QueueSpiCaller(), QUEUE_READ | QUEUE_MANAGE))
	{
		if (missing_ok)
			return 0;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("schedule \"%s\" does not exist", name),
				 errhint("List schedules with SELECT name FROM queue.schedules.")));
	}
	if (!QueueMay(q, QueueSpiCaller(), QUEUE_MANAGE))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for schedule \"%s\"", name),
				 errdetail("Its queue is \"%s\"; changing its schedules needs the manage privilege.", q->name),
				 errhint("The queue's owner can give it with queue.grant('%s', role, 'manage').", q->name)));
	/* moved to another queue meanwhile: look again */
	if (find_schedule(name, true, row, desc) != qno)
		return open_schedule(fcinfo, missing_ok, row, desc);
	return qno;
}

/* Run sql on schedule argument 0 (its only parameter). */
static void
update_schedule(FunctionCallInfo fcinfo, const char *sql, int expected)
{
	Oid			type = TEXTOID;
	Datum		value = PG_GETARG_DATUM(0);

	check_spi(SPI_execute_with_args(sql, 1, &type, &value, NULL, false, 0), expected, "change a schedule");
}

/* queue.unschedule(name, if_exists): its jobs stay. */
PG_FUNCTION_INFO_V1(queue_unschedule);
Datum
queue_unschedule(PG_FUNCTION_ARGS)
{
	bool		found;

	QueueCheckNotNull(PG_ARGISNULL(1), "if_exists", "Pass true or false.");
	QueueSpiBegin();
	found = open_schedule(fcinfo, PG_GETARG_BOOL(1), NULL, NULL) != 0;
	if (found)
		update_schedule(fcinfo, "DELETE FROM queue.queue_schedules WHERE name OPERATOR(pg_catalog.=) $1",
						SPI_OK_DELETE);
	QueueSpiEnd();
	if (!found)
		ereport(NOTICE,
				(errmsg("schedule \"%s\" does not exist, skipping", text_to_cstring(PG_GETARG_TEXT_PP(0)))));
	PG_RETURN_BOOL(found);
}

/* queue.pause_schedule(name): no ticks until it is resumed. */
PG_FUNCTION_INFO_V1(queue_pause_schedule);
Datum
queue_pause_schedule(PG_FUNCTION_ARGS)
{
	QueueSpiBegin();
	(void) open_schedule(fcinfo, false, NULL, NULL);
	update_schedule(fcinfo, "UPDATE queue.queue_schedules SET paused = true WHERE name OPERATOR(pg_catalog.=) $1",
					SPI_OK_UPDATE);
	QueueSpiEnd();
	PG_RETURN_VOID();
}

/*
 * queue.resume_schedule(name): ticking again, from the next tick after
 * now (the ticks it missed while paused get no job); returns it.
 */
PG_FUNCTION_INFO_V1(queue_resume_schedule);
Datum
queue_resume_schedule(PG_FUNCTION_ARGS)
{
	Datum		value = PG_GETARG_DATUM(0);
	ScheduleTiming timing;
	TimestampTz next;
	TimestampTz now_ts = GetCurrentTimestamp();
	bool		isnull[4];
	HeapTuple	row;
	TupleDesc	desc;
	Datum		cron;
	Datum		every;

	QueueSpiBegin();
	(void) open_schedule(fcinfo, false, &row, &desc);
	cron = SPI_getbinval(row, desc, 2, &isnull[0]);
	every = SPI_getbinval(row, desc, 3, &isnull[1]);
	ScheduleTimingMake(isnull[0] ? NULL : TextDatumGetCString(cron),
					   isnull[1] ? NULL : DatumGetIntervalP(every),
					   TextDatumGetCString(SPI_getbinval(row, desc, 4, &isnull[2])), &timing);
	next = DatumGetTimestampTz(SPI_getbinval(row, desc, 5, &isnull[3]));
	if (DatumGetBool(SPI_getbinval(row, desc, 6, &isnull[3])) && next <= now_ts)
		next = ScheduleTickAfter(&timing, next, now_ts);
	check_spi(SPI_execute_with_args("UPDATE queue.queue_schedules SET paused = false, next_run_at = $2"
									" WHERE name OPERATOR(pg_catalog.=) $1",
									2, (Oid[]) {TEXTOID, TIMESTAMPTZOID},
									(Datum[]) {value, TimestampTzGetDatum(next)}, NULL, false, 0),
			  SPI_OK_UPDATE, "change a schedule");
	QueueSpiEnd();
	PG_RETURN_TIMESTAMPTZ(next);
}

/*
 * queue.cron_ticks(cron, timezone, after, n): the next n ticks of a cron
 * expression, to see what a schedule will do.
 */
PG_FUNCTION_INFO_V1(queue_cron_ticks);
Datum
queue_cron_ticks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ScheduleTiming timing;
	TimestampTz t;
	int32		n;

	QueueCheckNotNull(PG_ARGISNULL(0), "cron", "Pass a cron expression such as '0 9 * * *'.");
	QueueCheckNotNull(PG_ARGISNULL(2), "after", "Leave it out for now().");
	QueueCheckNotNull(PG_ARGISNULL(3), "n", "Leave it out for 5.");
	n = PG_GETARG_INT32(3);
	if (n < 1 || n > CRON_TICKS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("n must be between 1 and %d, not %d", CRON_TICKS_MAX, n),
				 errhint("n is how many of the next ticks to list.")));
	ScheduleTimingMake(text_to_cstring(PG_GETARG_TEXT_PP(0)), NULL,
					   PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)), &timing);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	t = PG_GETARG_TIMESTAMPTZ(2);
	for (int i = 0; i < n; i++)
	{
		Datum		value;
		bool		isnull = false;

		t = ScheduleTickAfter(&timing, t, t);
		if (TIMESTAMP_NOT_FINITE(t))
			break;
		value = TimestampTzGetDatum(t);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	return (Datum) 0;
}
