/*-------------------------------------------------------------------------
 *
 * job.h
 *	  What a job is: its states, the columns of its row, and the limits of
 *	  one call.
 *
 * One description of the job row serves every file that reads or writes
 * one: the direct paths (storage/), the saved statements (catalog/plans.c)
 * and the jobs a transaction holds in memory (xact/held.c).  The first
 * JOB_NCARRIED columns are the ones a claimed job carries: what a claim
 * returns, what xact/held.c keeps, what the archive copies from.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_BASE_JOB_H
#define QUEUE_BASE_JOB_H

#include "lib/stringinfo.h"

/* Limits of one call. */
#define QUEUE_MAX_CLAIM			10000	/* jobs one claim takes */
#define QUEUE_MAX_BATCH			1000000 /* jobs one enqueue_batch adds */
#define QUEUE_MAX_COMPLETE		100000	/* ids one complete(ids[]) takes */
#define QUEUE_MAX_KEY_LEN		512 /* bytes of a group_key or dedup_key */
#define QUEUE_MAX_ERROR_LEN		65536	/* bytes of an error fail() keeps */
#define QUEUE_PROMOTE_BATCH		1000	/* scheduled jobs one claim promotes */

/* The stored states of a job (queue.job_state), as counted for queue.stats. */
typedef enum JobState
{
	JS_NONE = -1,				/* not in the hot table */
	JS_READY,
	JS_SCHEDULED,
	JS_RUNNING,
	JS_DEAD,
	JS_WAITING,
	JS_NSTATES
} JobState;

extern const char *const job_state_names[JS_NSTATES];
extern JobState JobStateFromName(const char *name);

/* The columns of queue._job. */
typedef enum JobCol
{
	JC_ID,
	JC_PAYLOAD,
	JC_ATTEMPT,
	JC_GROUP_KEY,
	JC_ENQUEUED_AT,
	JC_LEASE_UNTIL,
	JC_PRIORITY,
	JC_RANK,
	JC_RUN_AT,
	JC_DEDUP_KEY,
	JC_LAST_ERROR,
	JC_HISTORY,
	JC_UNCOUNTED,
	JC_CLAIMED_AT,				/* the last carried column */
	JC_STATE,
	JC_OWNER_PID,
	JC_OWNER_START,
	JC_NCOLS
} JobCol;

#define JOB_NCARRIED	(JC_CLAIMED_AT + 1)

/* What a column is for. */
#define JOB_COL_ENQUEUE		0x01	/* set by an enqueue */
#define JOB_COL_ARCHIVE		0x02	/* copied into the archive */

typedef struct JobColumn
{
	const char *name;
	Oid			type;			/* InvalidOid: the extension's job_state */
	Oid			arraytype;
	int			flags;
} JobColumn;

extern const JobColumn job_columns[JC_NCOLS];

/*
 * The columns of an archive row: the job's columns it copies, in JobCol
 * order, then its own three.
 */
typedef enum ArchiveCol
{
	AC_ID,
	AC_PAYLOAD,
	AC_ATTEMPT,
	AC_GROUP_KEY,
	AC_ENQUEUED_AT,
	AC_PRIORITY,
	AC_RUN_AT,
	AC_DEDUP_KEY,
	AC_LAST_ERROR,
	AC_HISTORY,
	AC_CLAIMED_AT,
	AC_FINISHED_AT,
	AC_STATE,					/* text: 'done' or 'cancelled' */
	AC_SEG,
	AC_NCOLS
} ArchiveCol;

extern JobCol ArchiveColumnSource(ArchiveCol c);
extern const JobCol *ArchiveColumnSources(void);
extern const char *ArchiveColumnName(ArchiveCol c);
extern Oid	ArchiveColumnType(ArchiveCol c);

/* How a column's values are stored (typlen, typbyval, typalign). */
typedef struct JobColumnStorage
{
	int16		len;
	bool		byval;
	char		align;
} JobColumnStorage;

extern const JobColumnStorage *JobColumnStorageOf(JobCol c);
extern const JobColumnStorage *JobColumnStorages(void);
extern void JobColumnArrays(int n, Datum *const *values, bool *const *nulls, Datum *arrays);
extern void JobColumnNames(StringInfo buf, const char *prefix, int flags, int ncols);

#endif							/* QUEUE_BASE_JOB_H */
