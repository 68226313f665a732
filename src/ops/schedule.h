/*-------------------------------------------------------------------------
 *
 * schedule.h
 *	  Periodic jobs: when a schedule ticks (ops/schedule.c), and firing
 *	  its due ticks (ops/fire.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_OPS_SCHEDULE_H
#define QUEUE_OPS_SCHEDULE_H

#include "datatype/timestamp.h"
#include "pgtime.h"

#include "base/cron.h"

/* When a schedule ticks: a cron expression in a time zone, or an interval. */
typedef struct ScheduleTiming
{
	bool		is_cron;
	CronSpec	cron;
	pg_tz	   *tz;				/* for cron */
	int64		every;			/* microseconds, for every */
} ScheduleTiming;

extern void ScheduleTimingMake(const char *cron, Interval *every, const char *tzname,
							   ScheduleTiming *timing);
extern TimestampTz ScheduleTickAfter(const ScheduleTiming *timing, TimestampTz tick,
									 TimestampTz after);
extern Oid	QueueSchedulesRelid(void);

/* fire.c */
#define SCHEDULES_PER_PASS	1000	/* schedules one transaction fires at most */

extern bool QueueFireSchedules(int limit, bool from_worker, int64 *jobs, TimestampTz *next);

#endif							/* QUEUE_OPS_SCHEDULE_H */
