/*-------------------------------------------------------------------------
 *
 * cron.h
 *	  Cron expressions: parsing one, and finding the next time it fires.
 *
 * A parsed expression is a set of bits per field, so that checking a time
 * against it is a few shifts; cron.c describes the syntax and how clocks
 * that jump for daylight-saving time are handled.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_BASE_CRON_H
#define QUEUE_BASE_CRON_H

#include "datatype/timestamp.h"
#include "pgtime.h"

typedef struct CronSpec
{
	uint64		seconds;		/* bit n: second n, 0-59 (the 5-field form:
								 * second 0 only) */
	uint64		minutes;		/* 0-59 */
	uint32		hours;			/* 0-23 */
	uint32		mdays;			/* 1-31 */
	uint16		months;			/* 1-12 */
	uint8		wdays;			/* 0-6, Sunday 0 (7 in the text is Sunday too) */
	bool		mday_any;		/* the day-of-month field was '*' */
	bool		wday_any;		/* the day-of-week field was '*' */
} CronSpec;

extern void CronParse(const char *expr, CronSpec *spec);
extern TimestampTz CronNext(const CronSpec *spec, TimestampTz after, pg_tz *tz);

#endif							/* QUEUE_BASE_CRON_H */
