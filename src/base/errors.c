/*-------------------------------------------------------------------------
 *
 * errors.c
 *	  The errors several files raise, worded once: a statement on a queue's
 *	  tables that did not do what it should, keys that are too long, nulls,
 *	  and things that do not exist.
 *
 * Something that does not exist, a queue or a job, is undefined_object
 * (42704), as for PostgreSQL's own objects.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "base/errors.h"
#include "base/job.h"

/*
 * Check what a statement on a queue's tables did: ret must be expected
 * and, unless want_rows < 0, it must have touched that many rows.  Only a
 * rule or trigger someone added to the tables can make it otherwise, so
 * the error names them rather than reporting an internal error.
 */
void
QueueCheckSpi(int ret, int expected, int64 want_rows, const char *what, const char *qname)
{
	if (ret == expected && (want_rows < 0 || SPI_processed == (uint64) want_rows))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not %s in queue \"%s\"", what, qname),
			 want_rows < 0 ?
			 errdetail("The statement returned %s.", SPI_result_code_string(ret)) :
			 errdetail("The statement returned %s for " UINT64_FORMAT " rows of " INT64_FORMAT ".",
					   SPI_result_code_string(ret), SPI_processed, want_rows),
			 errhint("A rule or trigger on the queue's tables rewrote the statement or skipped rows; drop it.")));
}

/*
 * Group and dedup keys are free text but bounded, so that a runaway key
 * cannot bloat the unique index.
 */
void
QueueCheckKey(const char *what, text *key)
{
	if (key != NULL && VARSIZE_ANY_EXHDR(key) > QUEUE_MAX_KEY_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s is too long", what),
				 errdetail("It has %d bytes; the limit is %d.",
						   (int) VARSIZE_ANY_EXHDR(key), QUEUE_MAX_KEY_LEN),
				 errhint("Use a shorter key, for example a hash of the long one.")));
}

/* An argument that must not be null: what it is, and what to pass instead. */
void
QueueCheckNotNull(bool isnull, const char *what, const char *hint)
{
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what),
				 errhint("%s", hint)));
}

void
QueueErrorNoQueueNumber(int32 qno)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("queue number %d does not exist", qno),
			 errhint("List queues with SELECT * FROM queue.queues.")));
	pg_unreachable();
}

/* detail may be NULL */
void
QueueErrorNoJob(int64 id, const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("job " INT64_FORMAT " does not exist", id),
			 detail != NULL ? errdetail("%s", detail) : 0,
			 errhint("%s", hint)));
	pg_unreachable();
}
