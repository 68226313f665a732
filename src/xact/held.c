/*-------------------------------------------------------------------------
 *
 * held.c
 *	  Held claims: jobs claimed by the current transaction, kept in memory
 *	  until it commits.
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
 * which each happened.  xact/xact.c calls the steps at the end of each
 * (sub)transaction.
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

#include "base/errors.h"
#include "base/job.h"
#include "base/role.h"
#include "catalog/plans.h"
#include "catalog/spi.h"
#include "storage/insert.h"
#include "xact/held.h"
#include "xact/pending.h"

static List *held = NIL;

/*
 * Keep one job a claim just deleted: its carried columns, copied into
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

	for (int c = 0; c < JOB_NCARRIED; c++)
	{
		const JobColumnStorage *t = JobColumnStorageOf((JobCol) c);

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
	j->id = DatumGetInt64(j->values[JC_ID]);
	j->qno = qno;
	j->nest = GetCurrentTransactionNestLevel();
	j->done_nest = 0;
	j->written_nest = 0;
	j->userid = GetUserId();
	held = lappend(held, j);
	MemoryContextSwitchTo(old);
}

/* The rows of jobs, as QueueArchiveJobs and JobColumnArrays take them. */
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
		else if (has_token && DatumGetInt32(j->values[JC_ATTEMPT]) != token)
			continue;			/* stale */
		else
		{
			j->done_nest = nest;
			done_ids[*ndone] = ids[i];
			done[(*ndone)++] = j;
			if (!j->nulls[JC_GROUP_KEY])
				groups[(*ngroups)++] = j->values[JC_GROUP_KEY];
		}
	}

	if (*ndone > 0 && q->keep_archive)
	{
		Datum	  **values;
		bool	  **nulls;

		job_rows(done, *ndone, &values, &nulls);
		QueueArchiveJobs(q, *ndone, values, nulls);
	}
	pfree(mine);
	pfree(done);
	return rest;
}

/*
 * Whether j is an unfinished job of queue qno this transaction holds whose
 * column col (a text) is key.  Such a job has no row for other
 * statements' indexes to find.
 */
static bool
held_matches(HeldJob *j, int32 qno, int col, text *key)
{
	text	   *k;

	if (j->qno != qno || j->done_nest != 0 || j->written_nest != 0 || j->nulls[col])
		return false;
	k = DatumGetTextPP(j->values[col]);
	return VARSIZE_ANY_EXHDR(k) == VARSIZE_ANY_EXHDR(key) &&
		memcmp(VARDATA_ANY(k), VARDATA_ANY(key), VARSIZE_ANY_EXHDR(k)) == 0;
}

/* The first held job that held_matches, or NULL. */
static HeldJob *
held_with_key(int32 qno, int col, text *key)
{
	ListCell   *lc;

	foreach(lc, held)
		if (held_matches((HeldJob *) lfirst(lc), qno, col, key))
			return (HeldJob *) lfirst(lc);
	return NULL;
}

/* How many jobs of this group this transaction holds (active ones). */
int
QueueHeldInGroup(int32 qno, text *group_key)
{
	ListCell   *lc;
	int			n = 0;

	foreach(lc, held)
		n += held_matches((HeldJob *) lfirst(lc), qno, JC_GROUP_KEY, group_key);
	return n;
}

/* How many jobs of queue qno this transaction holds (queue.stats). */
int64
QueueHeldCount(int32 qno)
{
	ListCell   *lc;
	int64		n = 0;

	foreach(lc, held)
	{
		HeldJob    *j = (HeldJob *) lfirst(lc);

		if (j->qno == qno && j->done_nest == 0 && j->written_nest == 0)
			n++;
	}
	return n;
}

/* The id of the job with this dedup_key this transaction holds, or 0. */
int64
QueueHeldWithDedup(int32 qno, text *dedup_key)
{
	HeldJob    *j = held_with_key(qno, JC_DEDUP_KEY, dedup_key);

	return j != NULL ? j->id : 0;
}

/*
 * Write the held jobs of queue q (all of them, or only job id) back as
 * running rows.  Must be called inside QueueSpiBegin.
 *
 * They are written as the role that claimed them: the queue's owner, for
 * a claim through the API (catalog/acl.c).  The claim took their rows
 * with that role's rights, and the commit may run as a role that may not
 * insert into the queue's table.  A restricted operation, as the claim
 * was, and for an owner that is not a superuser one whose settings are
 * undone afterwards: a trigger of the owner's cannot reach the committing
 * session (one that set search_path had the session's next statement run
 * the owner's functions as the committing superuser).
 */
static void
write_back(QueueInfo *q, int64 only_id)
{
	int			n = 0;
	bool		more = false;
	Oid			userid = InvalidOid;
	QueueAsRole as;
	ListCell   *lc;
	HeldJob   **jobs = palloc(sizeof(HeldJob *) * list_length(held));
	Datum		args[JOB_NCARRIED + 2];
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
	JobColumnArrays(n, values, nulls, args);
	args[JOB_NCARRIED] = Int32GetDatum(MyProcPid);
	args[JOB_NCARRIED + 1] = TimestampTzGetDatum(MyStartTimestamp);
	QueueAsRoleInScopeBegin(&as, userid);
	QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_REINSERT), args, NULL, false, 0),
				  SPI_OK_INSERT, n, "write back claimed jobs", q->name);
	QueueAsRoleEnd(&as);
	QueueXactCount(q->qno, JS_NONE, JS_RUNNING, n);
	/* the worker returns them when their lease runs out: tell it when */
	for (int i = 0; i < n; i++)
		QueueXactLeased(q->qno, DatumGetTimestampTz(jobs[i]->values[JC_LEASE_UNTIL]));
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

/*
 * Write back every held job, of every queue: management functions see
 * every job as a row.  Must be called inside QueueSpiBegin.
 */
void
QueueHeldWriteBackAll(void)
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

/* The jobs this transaction holds, for queue._held(). */
List *
QueueHeldJobs(void)
{
	return held;
}

/* Before commit: what we still hold becomes running rows. */
void
HeldAtPreCommit(void)
{
	if (held == NIL)
		return;
	PushActiveSnapshot(GetTransactionSnapshot());
	QueueSpiBegin();
	QueueHeldWriteBackAll();
	QueueSpiEnd();
	PopActiveSnapshot();
}

/*
 * COMMIT PREPARED, perhaps in another session, could not write held jobs
 * back: they would be lost.  (xact/pending.c refuses this too, but only
 * where shared memory is set up.)
 */
void
HeldAtPrepare(void)
{
	if (held != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that claimed jobs"),
				 errhint("Commit it directly, or move the queue calls out of the prepared transaction.")));
}

/* The transaction ended: the list's memory went with it. */
void
HeldAtEnd(void)
{
	held = NIL;
}

/* A subtransaction at level nest ended. */
void
HeldAtSubEnd(int nest, bool commit)
{
	ListCell   *lc;

	foreach(lc, held)
	{
		HeldJob    *j = (HeldJob *) lfirst(lc);

		if (!commit)
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
		else
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
