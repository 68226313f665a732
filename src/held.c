/*-------------------------------------------------------------------------
 *
 * held.c
 *	  Jobs claimed by the current transaction, kept in memory until it
 *	  commits.
 *
 * A claim deletes the jobs it takes from the hot table and keeps their
 * rows here.  If the transaction completes a job before it commits (the
 * exactly-once way of consuming), the job goes straight to the archive, or
 * nowhere with retention 0: its running state is never written, which
 * halves the work of a claim-and-complete.  Jobs still held when the
 * transaction is about to commit are written back as running rows, with
 * the same id, at XACT_EVENT_PRE_COMMIT (the leased way of consuming).  If
 * the transaction aborts, the delete is undone with it and the jobs are
 * ready again, exactly as before the claim.
 *
 * Other sessions see a held job as a row locked by us, as they would see a
 * row we updated; claims skip it.  Within the transaction, anything other
 * than complete (fail, extend, release, and the management functions)
 * first writes the held job back, then acts on the row.
 *
 * Subtransactions: a rolled-back savepoint undoes the claims, completions
 * and write-backs made inside it, so entries remember the nesting level at
 * which each happened.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "queue.h"

typedef struct HeldJob
{
	int64		id;
	int32		qno;
	int			nest;			/* level that claimed it */
	int			done_nest;		/* level that completed it, 0 if none */
	int			written_nest;	/* level that wrote it back, 0 if none */
	Oid			userid;			/* the role that claimed it */
	Datum		values[HELD_NCOLS];
	bool		nulls[HELD_NCOLS];
} HeldJob;

static List *held = NIL;

/* Element types of the columns, for building arrays; see PLAN_REINSERT. */
static const Oid held_types[HELD_NCOLS] = {
	INT8OID, JSONBOID, INT4OID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
	INT4OID, INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, JSONBOID, INT4OID, TIMESTAMPTZOID
};

/*
 * Their storage, looked up once per backend: a claim copies every column
 * of every job it takes, and a catalog lookup per column was more than
 * half of that copy.
 */
typedef struct HeldType
{
	int16		len;
	bool		byval;
	char		align;
} HeldType;

static HeldType held_typinfo[HELD_NCOLS];
static bool held_typinfo_ready = false;

static const HeldType *
held_type(int c)
{
	if (!held_typinfo_ready)
	{
		for (int i = 0; i < HELD_NCOLS; i++)
			get_typlenbyvalalign(held_types[i], &held_typinfo[i].len,
								 &held_typinfo[i].byval, &held_typinfo[i].align);
		held_typinfo_ready = true;
	}
	return &held_typinfo[c];
}

/*
 * Keep one job a claim just deleted: its HELD_* columns, copied into
 * transaction memory.  Values stored out of line are fetched (the rows
 * they point to go away at commit), but compressed ones stay compressed:
 * the archive then stores them as they are instead of decompressing and
 * compressing them again.
 */
void
QueueHeldAddJob(int32 qno, const Datum *values, const bool *nulls)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	HeldJob    *j = palloc(sizeof(HeldJob));

	for (int c = 0; c < HELD_NCOLS; c++)
	{
		const HeldType *t = held_type(c);

		j->nulls[c] = nulls[c];
		if (nulls[c])
		{
			j->values[c] = (Datum) 0;
			continue;
		}
		if (t->len == -1 && VARATT_IS_EXTERNAL(DatumGetPointer(values[c])))
			j->values[c] = PointerGetDatum(detoast_external_attr((struct varlena *) DatumGetPointer(values[c])));
		else
			j->values[c] = datumCopy(values[c], t->byval, t->len);
	}
	j->id = DatumGetInt64(j->values[HELD_ID]);
	j->qno = qno;
	j->nest = GetCurrentTransactionNestLevel();
	j->done_nest = 0;
	j->written_nest = 0;
	j->userid = GetUserId();
	held = lappend(held, j);
	MemoryContextSwitchTo(old);
}

/* The rows of jobs, as QueueArchive and column_arrays take them. */
static void
job_rows(HeldJob **jobs, int n, Datum ***values, bool ***nulls)
{
	*values = palloc(sizeof(Datum *) * n);
	*nulls = palloc(sizeof(bool *) * n);
	for (int i = 0; i < n; i++)
	{
		(*values)[i] = jobs[i]->values;
		(*nulls)[i] = jobs[i]->nulls;
	}
}

/*
 * Arrays of the HELD_* columns of n rows (one array per column), for the
 * statements that write many rows at once: args[0..HELD_NCOLS-1].
 */
static void
column_arrays(int n, Datum *const *values, bool *const *nulls, Datum *args)
{
	Datum	   *vals = palloc(sizeof(Datum) * n);
	bool	   *isnull = palloc(sizeof(bool) * n);

	for (int c = 0; c < HELD_NCOLS; c++)
	{
		const HeldType *t = held_type(c);
		int			dims[1] = {n};
		int			lbs[1] = {1};

		for (int i = 0; i < n; i++)
		{
			vals[i] = values[i][c];
			isnull[i] = nulls[i][c];
		}
		args[c] = PointerGetDatum(construct_md_array(vals, isnull, 1, dims, lbs,
													 held_types[c], t->len, t->byval, t->align));
	}
	pfree(vals);
	pfree(isnull);
}

/*
 * Archive n finished jobs of q, given as rows of HELD_* columns: without
 * the executor if the archive allows (insert.c), else in one statement.
 * Must be called inside QueueSpiBegin.
 */
void
QueueArchive(QueueInfo *q, int n, Datum *const *values, bool *const *nulls)
{
	TimestampTz now_ts = GetCurrentTimestamp();
	Datum		args[HELD_NCOLS + 1];

	if (n == 0 || QueueArchiveRows(q, n, values, nulls, now_ts))
		return;
	column_arrays(n, values, nulls, args);
	args[HELD_NCOLS] = TimestampTzGetDatum(now_ts);
	queue_spi_check(SPI_execute_plan(QueueGetPlan(q, PLAN_ARCHIVE_HELD), args, NULL, false, 0),
					SPI_OK_INSERT, n, "archive completed jobs", q->name);
}

static int
cmp_job_id(const void *a, const void *b)
{
	int64		x = (*(HeldJob *const *) a)->id;
	int64		y = (*(HeldJob *const *) b)->id;

	return (x > y) - (x < y);
}

/*
 * Complete those of ids (all of queue q) that this transaction holds: they
 * go to the archive in one statement (nowhere with retention 0), and their
 * ids and group keys are returned in done_ids and groups.  A held job
 * whose token is stale is left alone.  The ids this transaction does not
 * hold are moved to the front of ids; returns how many.  Must be called
 * inside QueueSpiBegin.
 */
int
QueueHeldCompleteIds(QueueInfo *q, Datum *ids, int n, bool has_token, int32 token,
					 Datum *done_ids, int *ndone, Datum *groups, int *ngroups)
{
	HeldJob   **mine;
	HeldJob   **done;
	int			nmine = 0;
	int			rest = 0;
	int			nest = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	*ndone = *ngroups = 0;
	if (held == NIL)
		return n;

	/* this queue's held jobs, sorted by id, for a binary search per id */
	mine = palloc(sizeof(HeldJob *) * list_length(held));
	foreach(lc, held)
	{
		HeldJob    *j = (HeldJob *) lfirst(lc);

		if (j->qno == q->qno && j->done_nest == 0 && j->written_nest == 0)
			mine[nmine++] = j;
	}
	if (nmine == 0)
		return n;
	qsort(mine, nmine, sizeof(HeldJob *), cmp_job_id);

	done = palloc(sizeof(HeldJob *) * Min(n, nmine));
	for (int i = 0; i < n; i++)
	{
		HeldJob		key = {.id = DatumGetInt64(ids[i])};
		HeldJob    *keyp = &key;
		HeldJob   **found = bsearch(&keyp, mine, nmine, sizeof(HeldJob *), cmp_job_id);
		HeldJob    *j = found ? *found : NULL;

		if (j == NULL || j->done_nest != 0)
			ids[rest++] = ids[i];	/* not ours, or a repeated id */
		else if (has_token && DatumGetInt32(j->values[HELD_ATTEMPT]) != token)
			continue;			/* stale */
		else
		{
			j->done_nest = nest;
			done_ids[*ndone] = ids[i];
			done[(*ndone)++] = j;
			if (!j->nulls[HELD_GROUP_KEY])
				groups[(*ngroups)++] = j->values[HELD_GROUP_KEY];
		}
	}

	if (*ndone > 0 && q->keep_archive)
	{
		Datum	  **values;
		bool	  **nulls;

		job_rows(done, *ndone, &values, &nulls);
		QueueArchive(q, *ndone, values, nulls);
	}
	pfree(mine);
	pfree(done);
	return rest;
}

/*
 * The unfinished job of queue qno this transaction holds whose column col
 * (a text) is key, or NULL.  Such a job has no row for other statements'
 * indexes to find.
 */
static HeldJob *
held_with_key(int32 qno, int col, text *key)
{
	ListCell   *lc;

	foreach(lc, held)
	{
		HeldJob    *j = (HeldJob *) lfirst(lc);
		text	   *k;

		if (j->qno != qno || j->done_nest != 0 || j->written_nest != 0 || j->nulls[col])
			continue;
		k = DatumGetTextPP(j->values[col]);
		if (VARSIZE_ANY_EXHDR(k) == VARSIZE_ANY_EXHDR(key) &&
			memcmp(VARDATA_ANY(k), VARDATA_ANY(key), VARSIZE_ANY_EXHDR(k)) == 0)
			return j;
	}
	return NULL;
}

/* Whether this transaction holds a job of this group (its head). */
bool
QueueHeldInGroup(int32 qno, text *group_key)
{
	return held_with_key(qno, HELD_GROUP_KEY, group_key) != NULL;
}

/* The id of the job with this dedup_key this transaction holds, or 0. */
int64
QueueHeldWithDedup(int32 qno, text *dedup_key)
{
	HeldJob    *j = held_with_key(qno, HELD_DEDUP_KEY, dedup_key);

	return j != NULL ? j->id : 0;
}

/*
 * Write the held jobs of queue q (all of them, or only job id) back as
 * running rows.  Must be called inside QueueSpiBegin.
 *
 * They are written as the role that claimed them.  The claim took their
 * rows with that role's rights, perhaps in a SECURITY DEFINER function
 * that has returned since, and the commit may run as a role that may not
 * insert into the queue's table.
 */
static void
write_back(QueueInfo *q, int64 only_id)
{
	int			n = 0;
	bool		more = false;
	Oid			userid = InvalidOid;
	Oid			save_userid;
	int			save_sec;
	ListCell   *lc;
	HeldJob   **jobs = palloc(sizeof(HeldJob *) * list_length(held));
	Datum		args[HELD_NCOLS + 2];
	Datum	  **values;
	bool	  **nulls;

	foreach(lc, held)
	{
		HeldJob    *j = (HeldJob *) lfirst(lc);

		if (j->qno != q->qno || j->done_nest != 0 || j->written_nest != 0 ||
			(only_id != 0 && j->id != only_id))
			continue;
		if (n > 0 && j->userid != userid)
		{
			more = true;		/* claimed by another role: next round */
			continue;
		}
		userid = j->userid;
		jobs[n++] = j;
		j->written_nest = GetCurrentTransactionNestLevel();
	}
	if (n == 0)
		return;

	job_rows(jobs, n, &values, &nulls);
	column_arrays(n, values, nulls, args);
	args[HELD_NCOLS] = Int32GetDatum(MyProcPid);
	args[HELD_NCOLS + 1] = TimestampTzGetDatum(MyStartTimestamp);
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(userid, save_sec | SECURITY_LOCAL_USERID_CHANGE);
	queue_spi_check(SPI_execute_plan(QueueGetPlan(q, PLAN_REINSERT), args, NULL, false, 0),
					SPI_OK_INSERT, n, "write back claimed jobs", q->name);
	SetUserIdAndSecContext(save_userid, save_sec);
	QueueXactCount(q->qno, QS_NONE, QS_RUNNING, n);
	/* the worker returns them when their lease runs out: tell it when */
	for (int i = 0; i < n; i++)
		QueueXactLeased(q->qno, DatumGetTimestampTz(jobs[i]->values[HELD_LEASE_UNTIL]));
	if (more)
		write_back(q, only_id);
}

/*
 * Before fail, extend or release acts on job id (or before a management
 * function reads the queue, with id 0): write back what we hold of it.
 * Must be called inside QueueSpiBegin.
 */
void
QueueHeldWriteBack(QueueInfo *q, int64 id)
{
	if (held != NIL)
		write_back(q, id);
}

/* Write back every held job, of every queue. */
static void
write_back_all(void)
{
	ListCell   *lc;

	foreach(lc, held)
	{
		HeldJob    *j = (HeldJob *) lfirst(lc);
		QueueInfo  *q;

		if (j->done_nest != 0 || j->written_nest != 0)
			continue;
		q = QueueLookupById(j->id, true);
		if (q == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("queue of claimed job " INT64_FORMAT " was dropped in the same transaction", j->id),
					 errhint("Complete or release claimed jobs before dropping their queue.")));
		write_back(q, 0);
	}
}

/* queue._write_back(): management functions see every job as a row. */
PG_FUNCTION_INFO_V1(queue_write_back);
Datum
queue_write_back(PG_FUNCTION_ARGS)
{
	if (held != NIL)
	{
		QueueSpiBegin();
		write_back_all();
		QueueSpiEnd();
	}
	PG_RETURN_VOID();
}

static void
held_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			if (held != NIL)
			{
				PushActiveSnapshot(GetTransactionSnapshot());
				QueueSpiBegin();
				write_back_all();
				QueueSpiEnd();
				PopActiveSnapshot();
			}
			break;
		case XACT_EVENT_PRE_PREPARE:

			/*
			 * COMMIT PREPARED, perhaps in another session, could not write
			 * held jobs back: they would be lost.  (xact.c refuses this too,
			 * but only where shared memory is set up.)
			 */
			if (held != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot PREPARE a transaction that claimed jobs"),
						 errhint("Commit it directly, or move the queue calls out of the prepared transaction.")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			held = NIL;			/* its memory goes with the transaction */
			break;
		default:
			break;
	}
}

static void
held_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	int			nest = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (held == NIL)
		return;
	foreach(lc, held)
	{
		HeldJob    *j = (HeldJob *) lfirst(lc);

		if (event == SUBXACT_EVENT_ABORT_SUB)
		{
			if (j->nest >= nest)
				held = foreach_delete_current(held, lc);	/* the delete is undone */
			else
			{
				/* the completion or write-back is undone */
				if (j->done_nest >= nest)
					j->done_nest = 0;
				if (j->written_nest >= nest)
					j->written_nest = 0;
			}
		}
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			if (j->nest >= nest)
				j->nest = nest - 1;
			if (j->done_nest >= nest)
				j->done_nest = nest - 1;
			if (j->written_nest >= nest)
				j->written_nest = nest - 1;
		}
	}
}

void
QueueHeldInit(void)
{
	RegisterXactCallback(held_xact_callback, NULL);
	RegisterSubXactCallback(held_subxact_callback, NULL);
}

/*
 * queue._held(): the jobs this transaction holds, so that queue.jobs and
 * queue.stats show them as running to the transaction that claimed them.
 */
PG_FUNCTION_INFO_V1(queue_held);
Datum
queue_held(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	static const int cols[] = {HELD_ID, HELD_PAYLOAD, HELD_ATTEMPT, HELD_GROUP_KEY, HELD_ENQUEUED_AT,
		HELD_LEASE_UNTIL, HELD_PRIORITY, HELD_RUN_AT, HELD_DEDUP_KEY, HELD_LAST_ERROR, HELD_CLAIMED_AT};
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	foreach(lc, held)
	{
		HeldJob    *j = (HeldJob *) lfirst(lc);
		Datum		values[lengthof(cols)];
		bool		nulls[lengthof(cols)];

		if (j->done_nest != 0 || j->written_nest != 0)
			continue;
		for (int c = 0; c < (int) lengthof(cols); c++)
		{
			values[c] = j->values[cols[c]];
			nulls[c] = j->nulls[cols[c]];
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
