/*-------------------------------------------------------------------------
 *
 * cron.c
 *	  Cron expressions: parsing one, and finding the next time it fires on
 *	  the wall clock of a time zone.
 *
 * Standard cron syntax: five fields (minute hour day-of-month month
 * day-of-week), or six with seconds first, separated by white space.  A
 * field is a comma-separated list of *, n, a-b, *\/s, a-b/s and n/s (n to
 * the field's largest value, step s).  Months jan..dec and days sun..sat,
 * in any case, go wherever a number does; day of the week 7 is Sunday too,
 * and a range may end on Sunday as 0 (fri-sun).  Macros: @yearly,
 * @annually, @monthly, @weekly, @daily, @midnight, @hourly.  Quartz's L, W,
 * # and ? are rejected.
 *
 * Days follow Vixie cron: if day-of-month and day-of-week are both
 * restricted, a day matches if either does; if one is '*', the other
 * decides.  Only a literal '*' is unrestricted: "*\/1" or "1-31" in one
 * field still makes it an either-or with the other, as in Vixie cron.
 *
 * Ticks are whole seconds on the zone's wall clock.  When the clock jumps:
 *
 * 1. Wall times that do not exist (the clocks jumped forward over them)
 *	  fire once, at the instant of the jump: 02:30 on the day Europe/Berlin
 *	  jumps from 02:00 to 03:00 fires at 03:00.  Several such times, and
 *	  03:00 itself, are all that one tick.
 * 2. Wall times that happen twice (the clocks went back) fire only the
 *	  first time, so that a daily job runs once a day.
 * 3. So too for an "after" inside the repeated hour: the second 02:30 is
 *	  skipped even if the first one came before "after".
 *
 * But if the hour field takes all 24 hours, the schedule follows real time,
 * as in cronie: repeated wall times fire both times, and none fire for the
 * times that do not exist ("30 * * * *" ticks an hour after 01:30 CET, at
 * 03:30 CEST), so that "*\/15 * * * *" keeps its 15 minutes.
 *
 * The search goes over spans of time with one UTC offset, and within each
 * walks the wall clock, skipping months, days, hours and minutes that
 * cannot match.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/pg_bitutils.h"
#include "utils/datetime.h"

#include "base/cron.h"

/* Longer text is surely a mistake, and keeps every buffer here small. */
#define CRON_MAX_LEN 200
#define CRON_FIELDS 6

/* Seconds from the Unix epoch, which pg_time_t counts from, to 2000-01-01 */
#define PG_EPOCH_SECS \
	((pg_time_t) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY)

/* A tick must come within 31 years, or there is none. */
#define CRON_HORIZON ((pg_time_t) 31 * 366 * SECS_PER_DAY)

/*
 * Bounds on the work of one CronNext: 31 years take at most some 12,000
 * steps (each skips a day or more), and zones change their UTC offset a
 * few times a year at most.
 */
#define CRON_MAX_STEPS 200000
#define CRON_MAX_SPANS 2000

#define ALL_HOURS ((UINT64CONST(1) << 24) - 1)

typedef struct CronField
{
	const char *name;			/* for messages */
	const char *const *names;	/* three-letter names from value 'first' */
	int			min;
	int			max;			/* largest value the text may use */
	int			star_max;		/* where '*' and n/s end */
	int			first;
} CronField;

static const char *const month_names[] = {
	"jan", "feb", "mar", "apr", "may", "jun",
	"jul", "aug", "sep", "oct", "nov", "dec", NULL
};

static const char *const day_names[] = {
	"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL
};

static const CronField cron_fields[CRON_FIELDS] = {
	{"second", NULL, 0, 59, 59, 0},
	{"minute", NULL, 0, 59, 59, 0},
	{"hour", NULL, 0, 23, 23, 0},
	{"day-of-month", NULL, 1, 31, 31, 0},
	{"month", month_names, 1, 12, 12, 1},
	{"day-of-week", day_names, 0, 7, 6, 0},
};

/* Each macro and its five fields */
static const char *const cron_macros[][2] = {
	{"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"},
	{"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
	{"@daily", "0 0 * * *"}, {"@midnight", "0 0 * * *"},
	{"@hourly", "0 * * * *"},
};

/* What an error in a field names: the expression, the field, its text */
typedef struct FieldText
{
	const char *expr;
	const CronField *field;
	const char *text;
} FieldText;

/* A stretch of time with one UTC offset, and the offset before it */
typedef struct ZoneSpan
{
	pg_time_t	start;			/* PG_INT64_MIN: long before the search */
	pg_time_t	end;			/* PG_INT64_MAX: no change known */
	long int	off;			/* seconds east of UTC */
	long int	prev_off;		/* the same as off if start is unknown */
} ZoneSpan;

/*
 * ASCII only: the locale's idea of letters and spaces must not change what
 * an expression means.
 */
#define CRON_ISSPACE(c) ((c) == ' ' || ((c) >= '\t' && (c) <= '\r'))
#define CRON_ISDIGIT(c) ((c) >= '0' && (c) <= '9')
#define CRON_ISALPHA(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))

static pg_attribute_noreturn() void
field_error(const FieldText *ft, const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid %s field \"%s\" in cron expression \"%s\"",
					ft->field->name, ft->text, ft->expr),
			 errdetail("%s", detail),
			 errhint("%s", hint ? hint :
					 "The fields are minute (0-59), hour (0-23), day of month (1-31), month (1-12) "
					 "and day of week (0-7, 0 and 7 are Sunday), and seconds (0-59) first if there are 6.")));
}

/*
 * Text at p that is not a number, name or step.  Quartz-style L, W, # and
 * ? get their own word: they are the likeliest cause.
 */
static pg_attribute_noreturn() void
token_error(const FieldText *ft, const char *p)
{
	size_t		len = strcspn(p, ",-/");
	char	   *tok = pnstrdup(p, len);

	if (len == 0)
		field_error(ft, *p ? psprintf("\"%c\" is out of place.", *p) :
					"A number is missing at the end.", NULL);
	if (strpbrk(tok, "#?") != NULL || strspn(tok, "LWlw") == len)
		field_error(ft, psprintf("\"%s\": L, W, # and ? are not supported.", tok),
					"Use *, n, a-b, */s, a-b/s, n/s and comma-separated lists of these.");
	field_error(ft, psprintf("\"%s\" is not a number%s.", tok,
							 !CRON_ISALPHA(*p) || ft->field->names == NULL ? "" :
							 ft->field->names == month_names ? " or a month name" :
							 " or a day name"), NULL);
}

/*
 * A number or a name at *p, or a step (a plain number from 1 up).  Numbers
 * stop growing at 10000, so that a long run of digits cannot overflow: it
 * is out of range either way.
 */
static int
parse_value(const FieldText *ft, const char **p, bool step)
{
	const CronField *f = ft->field;
	const char *s = *p;
	int			val = 0;

	if (CRON_ISDIGIT(*s))
	{
		for (; CRON_ISDIGIT(*s); s++)
			val = val < 10000 ? val * 10 + (*s - '0') : val;
	}
	else
	{
		int			i = 0;

		while (CRON_ISALPHA(*s))
			s++;
		while (!step && f->names != NULL && f->names[i] != NULL &&
			   (s - *p != 3 || pg_strncasecmp(*p, f->names[i], 3) != 0))
			i++;
		if (step || f->names == NULL || f->names[i] == NULL)
			token_error(ft, *p);
		val = f->first + i;
	}
	if (step ? val < 1 || val > f->max : val < f->min || val > f->max)
		field_error(ft, psprintf("The %s %s is out of range %d-%d.",
								 step ? "step" : f->name, pnstrdup(*p, s - *p),
								 step ? 1 : f->min, f->max), NULL);
	*p = s;
	return val;
}

/* One list item at p: its values go into *bits; returns where it ends. */
static const char *
parse_item(const FieldText *ft, const char *p, uint64 *bits)
{
	const CronField *f = ft->field;
	const char *start = p;
	int			lo;
	int			hi;
	int			step = 1;
	bool		single = false;

	if (*p == '*')
	{
		lo = f->min;
		hi = f->star_max;
		p++;
	}
	else
	{
		lo = hi = parse_value(ft, &p, false);
		single = true;
		if (*p == '-')
		{
			p++;
			hi = parse_value(ft, &p, false);
			single = false;
			if (f->names == day_names && hi == 0 && lo > 0)
				hi = 7;
			if (lo > hi)
				field_error(ft, psprintf("The range %s runs backwards.",
										 pnstrdup(start, p - start)), NULL);
		}
	}
	if (*p == '/')
	{
		p++;
		step = parse_value(ft, &p, true);
		if (single)
			hi = Max(lo, f->star_max);
	}
	if (*p != ',' && *p != '\0')
		token_error(ft, p);
	for (; lo <= hi; lo += step)
		*bits |= UINT64CONST(1) << lo;
	return p;
}

static uint64
parse_field(const char *expr, const CronField *f, const char *text, bool *any)
{
	FieldText	ft = {expr, f, text};
	const char *p = text;
	uint64		bits = 0;

	*any = strcmp(text, "*") == 0;
	for (;;)
	{
		if (*p == ',' || *p == '\0')
			field_error(&ft, "The list has an empty item.", NULL);
		p = parse_item(&ft, p, &bits);
		if (*p == '\0')
			return bits;
		p++;
	}
}

/* Cut buf into fields in place; returns how many there are, even past max. */
static int
split_fields(char *buf, char **fields, int max)
{
	int			n = 0;
	char	   *p = buf;

	for (;;)
	{
		while (CRON_ISSPACE(*p))
			p++;
		if (*p == '\0')
			return n;
		if (n < max)
			fields[n] = p;
		n++;
		while (*p != '\0' && !CRON_ISSPACE(*p))
			p++;
		if (*p != '\0')
			*p++ = '\0';
	}
}

/* A macro's five fields, written over buf */
static void
expand_macro(const char *expr, char *buf, const char *word)
{
	int			i;

	for (i = 0; i < (int) lengthof(cron_macros); i++)
		if (pg_strcasecmp(word, cron_macros[i][0]) == 0)
		{
			strlcpy(buf, cron_macros[i][1], CRON_MAX_LEN + 1);
			return;
		}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("cron expression \"%s\" is not a known macro", expr),
			 errhint("The macros are @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly.")));
}

/*
 * Days of the month that no allowed month has (Feb 30, Apr 31) would make
 * CronNext search 31 years for nothing; Feb 29 comes every four years or
 * so.  With days of the week restricted too, those fire (either-or).
 */
static void
check_fires(const char *expr, const CronSpec *spec)
{
	static const int month_len[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	int			m;

	if (spec->mday_any || !spec->wday_any)
		return;
	for (m = 1; m <= 12; m++)
		if (((spec->months >> m) & 1) != 0 &&
			(spec->mdays & (((UINT64CONST(1) << month_len[m - 1]) - 1) << 1)) != 0)
			return;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("cron expression \"%s\" never fires", expr),
			 errdetail("None of the months it allows has any of the days of the month it allows."),
			 errhint("April, June, September and November have 30 days, and February 29 (in leap years).")));
}

void
CronParse(const char *expr, CronSpec *spec)
{
	char		buf[CRON_MAX_LEN + 1];
	char	   *fields[CRON_FIELDS];
	size_t		len = strlen(expr);
	char	  **f = fields;
	int			n;
	bool		any;
	uint64		wdays;

	if (len > CRON_MAX_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cron expression is too long"),
				 errdetail("It has %zu bytes; the limit is %d.", len, CRON_MAX_LEN)));
	memcpy(buf, expr, len + 1);
	n = split_fields(buf, fields, CRON_FIELDS);
	if (n > 0 && fields[0][0] == '@')
	{
		expand_macro(expr, buf, n == 1 ? fields[0] : "");
		n = split_fields(buf, fields, CRON_FIELDS);
	}
	if (n != 5 && n != 6)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 n == 0 ? errmsg("cron expression \"%s\" is empty", expr) :
				 errmsg_plural("cron expression \"%s\" has %d field",
							   "cron expression \"%s\" has %d fields", n, expr, n),
				 errhint("Use 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first.")));

	memset(spec, 0, sizeof(CronSpec));
	/* the 5-field form fires at second 0 */
	spec->seconds = n == 6 ? parse_field(expr, &cron_fields[0], *f++, &any) : 1;
	spec->minutes = parse_field(expr, &cron_fields[1], *f++, &any);
	spec->hours = (uint32) parse_field(expr, &cron_fields[2], *f++, &any);
	spec->mdays = (uint32) parse_field(expr, &cron_fields[3], *f++, &spec->mday_any);
	spec->months = (uint16) parse_field(expr, &cron_fields[4], *f++, &any);
	wdays = parse_field(expr, &cron_fields[5], *f, &spec->wday_any);
	spec->wdays = (uint8) ((wdays | (wdays >> 7)) & 0x7F);
	check_fires(expr, spec);
}

/* The smallest value from 'from' on in mask, or -1 */
static inline int
next_bit(uint64 mask, int from)
{
	uint64		rest = mask >> from;

	return rest == 0 ? -1 : from + pg_rightmost_one_pos64(rest);
}

static inline bool
day_matches(const CronSpec *spec, int mday, int wday)
{
	bool		by_mday = (spec->mdays >> mday) & 1;
	bool		by_wday = (spec->wdays >> wday) & 1;

	if (spec->mday_any || spec->wday_any)
		return by_mday && by_wday;
	return by_mday || by_wday;
}

/* The Unix day number of the first day of the next month the spec allows */
static pg_time_t
next_month(const CronSpec *spec, int year, int mon)
{
	do
	{
		if (++mon > 12)
		{
			mon = 1;
			year++;
		}
	} while (!((spec->months >> mon) & 1));
	return date2j(year, mon, 1) - UNIX_EPOCH_JDATE;
}

/*
 * The first second of the day from sod on that the spec matches, or -1.
 * After a jump to a new hour or minute the next field matches at once.
 */
static int
next_in_day(const CronSpec *spec, int sod)
{
	while (sod < SECS_PER_DAY)
	{
		int			h = next_bit(spec->hours, sod / 3600);
		int			m;
		int			s;

		if (h < 0)
			return -1;
		if (h > sod / 3600)
			sod = h * 3600;
		m = next_bit(spec->minutes, sod / 60 % 60);
		if (m < 0)
		{
			sod = (h + 1) * 3600;
			continue;
		}
		if (m > sod / 60 % 60)
			sod = h * 3600 + m * 60;
		s = next_bit(spec->seconds, sod % 60);
		if (s >= 0)
			return h * 3600 + m * 60 + s;
		sod = h * 3600 + (m + 1) * 60;
	}
	return -1;
}

/*
 * The first wall-clock second in [from, limit) the spec matches, wall
 * times being counted like pg_time_t but on the local clock.  Months and
 * days that do not match cost a step each.
 */
static bool
next_wall(const CronSpec *spec, pg_time_t from, pg_time_t limit, int *budget,
		  pg_time_t *found)
{
	pg_time_t	day = from / SECS_PER_DAY - (from % SECS_PER_DAY < 0);
	int			sod = (int) (from - day * SECS_PER_DAY);

	while (--(*budget) > 0 && day * SECS_PER_DAY + sod < limit)
	{
		int			jd = (int) (day + UNIX_EPOCH_JDATE);
		int			year,
					mon,
					mday;

		j2date(jd, &year, &mon, &mday);
		if (!((spec->months >> mon) & 1))
		{
			day = next_month(spec, year, mon);
			sod = 0;
			continue;
		}
		if (day_matches(spec, mday, j2day(jd)) &&
			(sod = next_in_day(spec, sod)) >= 0)
		{
			*found = day * SECS_PER_DAY + sod;
			return *found < limit;
		}
		day++;
		sod = 0;
	}
	return false;
}

/* The UTC offset at t, and when it next changes */
static void
zone_at(pg_time_t t, pg_tz *tz, long int *off, pg_time_t *end)
{
	long int	after_off;
	int			isdst;
	pg_time_t	boundary;
	struct pg_tm *tm;

	switch (pg_next_dst_boundary(&t, off, &isdst, &boundary, &after_off, &isdst, tz))
	{
		case 1:
			*end = boundary;
			return;
		case 0:
			*end = PG_INT64_MAX;
			return;
		default:
			/* beyond what the zone's rules can say: keep the offset */
			tm = pg_localtime(&t, tz);
			*off = tm ? tm->tm_gmtoff : 0;
			*end = PG_INT64_MAX;
	}
}

static void
next_span(pg_tz *tz, ZoneSpan *span)
{
	span->start = span->end;
	span->prev_off = span->off;
	zone_at(span->start, tz, &span->off, &span->end);
}

/*
 * The span holding t.  A start up to three days back is looked for, as a
 * repeated hour just after it matters (rule 3); one further back does not.
 */
static void
first_span(pg_time_t t, pg_tz *tz, ZoneSpan *span)
{
	int			n;

	span->start = PG_INT64_MIN;
	zone_at(t - 3 * SECS_PER_DAY, tz, &span->off, &span->end);
	span->prev_off = span->off;
	for (n = 0; span->end <= t && n < CRON_MAX_SPANS; n++)
		next_span(tz, span);
}

/* The first tick in [t0, limit) within the span, by the rules above */
static bool
span_tick(const CronSpec *spec, const ZoneSpan *span, pg_time_t t0,
		  pg_time_t limit, int *budget, pg_time_t *tick)
{
	pg_time_t	from = Max(t0, span->start);
	pg_time_t	end = Min(span->end, limit);
	pg_time_t	wall;

	/* rule 1: wall times the clocks jumped over fire at the jump */
	if (span->start >= t0 && span->prev_off < span->off &&
		(spec->hours & ALL_HOURS) != ALL_HOURS &&
		next_wall(spec, span->start + span->prev_off, span->start + span->off,
				  budget, &wall))
	{
		*tick = span->start;
		return true;
	}
	if (from >= end)
		return false;
	wall = from + span->off;
	/* rule 2: wall times up to start + prev_off happened before start */
	if (span->prev_off > span->off && (spec->hours & ALL_HOURS) != ALL_HOURS)
		wall = Max(wall, span->start + span->prev_off);
	if (!next_wall(spec, wall, end + span->off, budget, &wall))
		return false;
	*tick = wall - span->off;
	return true;
}

TimestampTz
CronNext(const CronSpec *spec, TimestampTz after, pg_tz *tz)
{
	/* the last whole second a timestamptz can hold */
	const pg_time_t last = (END_TIMESTAMP - 1) / USECS_PER_SEC + PG_EPOCH_SECS;
	pg_time_t	t0;
	pg_time_t	limit;
	pg_time_t	tick;
	ZoneSpan	span;
	int			budget = CRON_MAX_STEPS;
	int			n;

	if (after >= END_TIMESTAMP)
		return DT_NOEND;
	/* keep clear of Julian day 0, where j2date stops */
	after = Max(after, MIN_TIMESTAMP + 2 * USECS_PER_DAY);
	t0 = after / USECS_PER_SEC - (after % USECS_PER_SEC < 0) + 1 + PG_EPOCH_SECS;
	limit = Min(t0 + CRON_HORIZON, last + 1);
	/* the last second of the range: cppcheck misses that after may be near it */
	/* cppcheck-suppress knownConditionTrueFalse */
	if (t0 >= limit)
		return DT_NOEND;

	first_span(t0, tz, &span);
	for (n = 0; n < CRON_MAX_SPANS && budget > 0; n++)
	{
		if (span_tick(spec, &span, t0, limit, &budget, &tick))
			return (TimestampTz) (tick - PG_EPOCH_SECS) * USECS_PER_SEC;
		if (span.end >= limit)
			break;
		next_span(tz, &span);
	}
	return DT_NOEND;
}
