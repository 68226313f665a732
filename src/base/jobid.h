/*-------------------------------------------------------------------------
 *
 * jobid.h
 *	  How a job id names its queue.
 *
 * A job id is (a value drawn from the queue's sequence) * JOB_ID_FACTOR +
 * the queue's number, so any function given only an id knows its queue,
 * and ids of one queue increase in enqueue order.  A batch lease's id is
 * made the same way (xact/leases.c).  The SQL side reads the queue number
 * with queue._qno(id); the archive's partition key, fixed when 0.1 was
 * released, spells it out as (id % 1000000).
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_BASE_JOBID_H
#define QUEUE_BASE_JOBID_H

#define JOB_ID_FACTOR		INT64CONST(1000000)
/* JOB_ID_FACTOR as SQL text, for statements that compute ranks from ids */
#define JOB_ID_FACTOR_SQL	"1000000"

/* Queue numbers run from 1 to JOB_ID_FACTOR - 1 (queue.queue_number_seq). */
static inline bool
QueueNumberValid(int64 qno)
{
	return qno > 0 && qno < JOB_ID_FACTOR;
}

static inline int64
JobIdMake(int64 seq, int32 qno)
{
	return seq * JOB_ID_FACTOR + qno;
}

/* The queue number of a job (or lease) id. */
static inline int32
JobIdQueue(int64 id)
{
	return (int32) (id % JOB_ID_FACTOR);
}

/* The sequence value an id was made from: a job's first rank. */
static inline int64
JobIdSeq(int64 id)
{
	return id / JOB_ID_FACTOR;
}

#endif							/* QUEUE_BASE_JOBID_H */
