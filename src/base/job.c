/*-------------------------------------------------------------------------
 *
 * job.c
 *	  The tables that describe a job: its states and its row's columns.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/lsyscache.h"

#include "base/job.h"

const char *const job_state_names[JS_NSTATES] = {
	[JS_READY] = "ready",
	[JS_SCHEDULED] = "scheduled",
	[JS_RUNNING] = "running",
	[JS_DEAD] = "dead",
	[JS_WAITING] = "waiting",
};

#define E JOB_COL_ENQUEUE
#define A JOB_COL_ARCHIVE
const JobColumn job_columns[JC_NCOLS] = {
	[JC_ID] = {"id", INT8OID, INT8ARRAYOID, E | A},
	[JC_PAYLOAD] = {"payload", JSONBOID, JSONBARRAYOID, E | A},
	[JC_ATTEMPT] = {"attempt", INT4OID, INT4ARRAYOID, E | A},
	[JC_GROUP_KEY] = {"group_key", TEXTOID, TEXTARRAYOID, E | A},
	[JC_ENQUEUED_AT] = {"enqueued_at", TIMESTAMPTZOID, TIMESTAMPTZARRAYOID, E | A},
	[JC_LEASE_UNTIL] = {"lease_until", TIMESTAMPTZOID, TIMESTAMPTZARRAYOID, 0},
	[JC_PRIORITY] = {"priority", INT4OID, INT4ARRAYOID, E | A},
	[JC_RANK] = {"rank", INT8OID, INT8ARRAYOID, E},
	[JC_RUN_AT] = {"run_at", TIMESTAMPTZOID, TIMESTAMPTZARRAYOID, E | A},
	[JC_DEDUP_KEY] = {"dedup_key", TEXTOID, TEXTARRAYOID, A},
	[JC_LAST_ERROR] = {"last_error", TEXTOID, TEXTARRAYOID, A},
	[JC_HISTORY] = {"history", JSONBOID, JSONBARRAYOID, A},
	[JC_UNCOUNTED] = {"uncounted", INT4OID, INT4ARRAYOID, E},
	[JC_CLAIMED_AT] = {"claimed_at", TIMESTAMPTZOID, TIMESTAMPTZARRAYOID, A},
	[JC_STATE] = {"state", InvalidOid, InvalidOid, E},
	[JC_OWNER_PID] = {"owner_pid", INT4OID, INT4ARRAYOID, 0},
	[JC_OWNER_START] = {"owner_start", TIMESTAMPTZOID, TIMESTAMPTZARRAYOID, 0},
};
#undef E
#undef A

/* The archive's own columns, after those it copies (AC_FINISHED_AT on). */
static const struct
{
	const char *name;
	Oid			type;
}			archive_own[AC_NCOLS - AC_FINISHED_AT] = {
	{"finished_at", TIMESTAMPTZOID},
	{"state", TEXTOID},
	{"seg", INT2OID},
};

JobState
JobStateFromName(const char *name)
{
	for (int i = 0; i < JS_NSTATES; i++)
		if (strcmp(name, job_state_names[i]) == 0)
			return (JobState) i;
	return JS_NONE;
}

/*
 * The job column archive column c copies, or -1 for the archive's own.
 * Computed once: the archive's insert asks for every column of every row.
 */
JobCol
ArchiveColumnSource(ArchiveCol c)
{
	return ArchiveColumnSources()[c];
}

/* The same for every archive column at once, indexed by ArchiveCol. */
const JobCol *
ArchiveColumnSources(void)
{
	static JobCol source[AC_NCOLS];
	static bool ready = false;

	if (!ready)
	{
		int			k = 0;

		for (int j = 0; j < JC_NCOLS; j++)
			if ((job_columns[j].flags & JOB_COL_ARCHIVE) != 0)
				source[k++] = (JobCol) j;
		if (k != AC_FINISHED_AT)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg_internal("the archive copies %d job columns, not %d", k, (int) AC_FINISHED_AT)));
		for (; k < AC_NCOLS; k++)
			source[k] = (JobCol) -1;
		ready = true;
	}
	return source;
}

const char *
ArchiveColumnName(ArchiveCol c)
{
	if (c >= AC_FINISHED_AT)
		return archive_own[c - AC_FINISHED_AT].name;
	return job_columns[ArchiveColumnSource(c)].name;
}

Oid
ArchiveColumnType(ArchiveCol c)
{
	if (c >= AC_FINISHED_AT)
		return archive_own[c - AC_FINISHED_AT].type;
	return job_columns[ArchiveColumnSource(c)].type;
}

/*
 * Looked up once per backend: a claim copies every carried column of every
 * job it takes, and a catalog lookup per column was more than half of that
 * copy.
 */
const JobColumnStorage *
JobColumnStorageOf(JobCol c)
{
	return &JobColumnStorages()[c];
}

/* The same for every column at once, indexed by JobCol. */
const JobColumnStorage *
JobColumnStorages(void)
{
	static JobColumnStorage storage[JC_NCOLS];
	static bool ready = false;

	if (!ready)
	{
		for (int i = 0; i < JC_NCOLS; i++)
		{
			if (OidIsValid(job_columns[i].type))
				get_typlenbyvalalign(job_columns[i].type, &storage[i].len,
									 &storage[i].byval, &storage[i].align);
			else
			{
				/* an enum: four bytes, by value */
				storage[i].len = sizeof(Oid);
				storage[i].byval = true;
				storage[i].align = TYPALIGN_INT;
			}
		}
		ready = true;
	}
	return storage;
}

/*
 * Arrays of the carried columns of n rows, one array per column
 * (arrays[0 .. JOB_NCARRIED - 1]), for the statements that write many rows
 * at once from unnest().
 */
void
JobColumnArrays(int n, Datum *const *values, bool *const *nulls, Datum *arrays)
{
	Datum	   *vals = palloc(sizeof(Datum) * Max(n, 1));
	bool	   *isnull = palloc(sizeof(bool) * Max(n, 1));

	for (int c = 0; c < JOB_NCARRIED; c++)
	{
		const JobColumnStorage *t = JobColumnStorageOf((JobCol) c);
		int			dims[1] = {n};
		int			lbs[1] = {1};

		for (int i = 0; i < n; i++)
		{
			vals[i] = values[i][c];
			isnull[i] = nulls[i][c];
		}
		arrays[c] = PointerGetDatum(construct_md_array(vals, isnull, 1, dims, lbs,
													   job_columns[c].type, t->len, t->byval,
													   t->align));
	}
	pfree(vals);
	pfree(isnull);
}

/*
 * Append the names of the first ncols job columns that have all of flags
 * (0: every one), comma-separated, each after prefix ("u." say), for the
 * text of a statement.
 */
void
JobColumnNames(StringInfo buf, const char *prefix, int flags, int ncols)
{
	bool		first = true;

	for (int c = 0; c < ncols; c++)
	{
		if ((job_columns[c].flags & flags) != flags)
			continue;
		appendStringInfo(buf, "%s%s%s", first ? "" : ", ", prefix, job_columns[c].name);
		first = false;
	}
}
