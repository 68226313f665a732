/*-------------------------------------------------------------------------
 *
 * insert.c
 *	  New rows of a queue's tables without the executor: one job at
 *	  enqueue (the hot path of producers), many at enqueue_batch, and
 *	  finished jobs into the archive at complete.
 *
 * Archive rows are inserted many at once with table_multi_insert, which
 * logs one WAL record per page instead of one per row: an archive keeps
 * every job a queue ever finished, so its insert is on the consumers' hot
 * path too.  The state, and when a table needs the executor instead, is
 * storage/direct.c's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "base/errors.h"
#include "base/jobid.h"
#include "catalog/plans.h"
#include "storage/direct.h"
#include "storage/insert.h"

/*
 * Rows per table_multi_insert: at most MAX_SLOTS (also the most slots a
 * state keeps), and, as COPY FROM does, no more than MAX_BATCH_BYTES of
 * values.  Every row of a batch is copied whole into its slot before any
 * is written: completing 1,000 jobs of 1 MB would have taken 1 GB at once,
 * and each batch of 100 jobs of 64 KB took 6.4 MB that the backend's
 * malloc handed back to the kernel and faulted in again for the next.
 */
#define MAX_SLOTS	1000
#define MAX_BATCH_BYTES 65536

/* A new job's row in slot. */
static void
fill_job(QueueDirectState *st, TupleTableSlot *slot, int64 id, TimestampTz run_at, JobState state,
		 int32 priority, text *group_key, Datum payload)
{
	ExecClearTuple(slot);
	for (int c = 0; c < slot->tts_tupleDescriptor->natts; c++)
		slot->tts_isnull[c] = true;
#define SET(col, datum) \
	(slot->tts_values[st->attnums[col] - 1] = (datum), slot->tts_isnull[st->attnums[col] - 1] = false)
	SET(JC_ID, Int64GetDatum(id));
	SET(JC_RANK, Int64GetDatum(JobIdSeq(id)));
	SET(JC_RUN_AT, TimestampTzGetDatum(run_at));
	SET(JC_ENQUEUED_AT, TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()));
	SET(JC_STATE, st->states[state]);
	SET(JC_PRIORITY, Int32GetDatum(priority));
	SET(JC_ATTEMPT, Int32GetDatum(0));
	SET(JC_UNCOUNTED, Int32GetDatum(0));
	if (group_key != NULL)
		SET(JC_GROUP_KEY, PointerGetDatum(group_key));
	SET(JC_PAYLOAD, payload);
#undef SET
	ExecStoreVirtualTuple(slot);
}

/* At least n (at most MAX_SLOTS) slots for table_multi_insert. */
static TupleTableSlot **
get_slots(QueueDirectState *st, int n)
{
	Assert(n <= MAX_SLOTS);
	if (st->nslots < n)
	{
		MemoryContext old = MemoryContextSwitchTo(st->cxt);
		TupleTableSlot **slots = palloc(sizeof(TupleTableSlot *) * n);

		for (int i = 0; i < st->nslots; i++)
			slots[i] = st->slots[i];
		for (int i = st->nslots; i < n; i++)
			slots[i] = MakeSingleTupleTableSlot(st->slot->tts_tupleDescriptor, &TTSOpsVirtual);
		st->slots = slots;
		st->nslots = n;
		MemoryContextSwitchTo(old);
	}
	return st->slots;
}

/* Insert the rows in slots[0..n-1], and their index entries. */
static void
insert_rows(QueueDirectState *st, Relation rel, TupleTableSlot **slots, int n)
{
	if (n == 1)
		table_tuple_insert(rel, slots[0], GetCurrentCommandId(true), 0, NULL);
	else
		table_multi_insert(rel, slots, n, GetCurrentCommandId(true), 0, NULL);
	QueueDirectIndexEntries(st, rel, slots, n, false);
	for (int i = 0; i < n; i++)
		ExecClearTuple(slots[i]);
}

/*
 * Insert one job into q's table (its rank is its sequence number).  Returns
 * false, having done nothing, if this table needs the executor (the caller
 * then uses SPI).
 */
bool
QueueInsertJob(QueueInfo *q, int64 id, TimestampTz run_at, JobState state,
			   int32 priority, text *group_key, Jsonb *payload)
{
	Relation	rel = QueueDirectOpen(q, false, ACL_INSERT);

	if (rel == NULL)
		return false;
	fill_job(q->direct, q->direct->slot, id, run_at, state, priority, group_key, JsonbPGetDatum(payload));
	insert_rows(q->direct, rel, &q->direct->slot, 1);
	table_close(rel, NoLock);
	return true;
}

/*
 * Insert n jobs into q's table: the first in first_state, the others in
 * state.  Returns false, having done nothing, if this table needs the
 * executor.
 */
bool
QueueInsertJobs(QueueInfo *q, int n, const Datum *ids, TimestampTz run_at, JobState first_state,
				JobState state, int32 priority, text *group_key, const Datum *payloads)
{
	Relation	rel = QueueDirectOpen(q, false, ACL_INSERT);

	if (rel == NULL)
		return false;
	for (int first = 0, m; first < n; first += m)
	{
		TupleTableSlot **slots;
		Size		bytes = 0;

		for (m = 0; first + m < n && m < MAX_SLOTS && bytes < MAX_BATCH_BYTES; m++)
			bytes += VARSIZE_ANY(DatumGetPointer(payloads[first + m]));
		slots = get_slots(q->direct, m);

		for (int i = 0; i < m; i++)
			fill_job(q->direct, slots[i], DatumGetInt64(ids[first + i]), run_at,
					 first + i == 0 ? first_state : state, priority, group_key, payloads[first + i]);
		insert_rows(q->direct, rel, slots, m);
	}
	table_close(rel, NoLock);
	return true;
}

/* The bytes of an archive row's variable-length values. */
static Size
archive_row_bytes(const Datum *values, const bool *nulls)
{
	const JobCol *source = ArchiveColumnSources();
	const JobColumnStorage *storage = JobColumnStorages();
	Size		bytes = 0;

	for (int c = 0; c < AC_FINISHED_AT; c++)
	{
		JobCol		j = source[c];

		if (!nulls[j] && storage[j].len == -1)
			bytes += VARSIZE_ANY(DatumGetPointer(values[j]));
	}
	return bytes;
}

/*
 * The archive row of one finished job (its carried columns values, nulls)
 * in slot; state is the text 'done'.
 */
static void
fill_archive_row(QueueDirectState *st, TupleTableSlot *slot, const Datum *values, const bool *nulls,
				 TimestampTz finished_at, Datum state, int16 seg)
{
	const JobCol *source = ArchiveColumnSources();

	ExecClearTuple(slot);
	for (int c = 0; c < slot->tts_tupleDescriptor->natts; c++)
		slot->tts_isnull[c] = true;
	for (int c = 0; c < AC_FINISHED_AT; c++)
	{
		AttrNumber	a = st->attnums[c] - 1;
		JobCol		j = source[c];

		slot->tts_values[a] = values[j];
		slot->tts_isnull[a] = nulls[j];
	}
#define SET(col, datum) \
	(slot->tts_values[st->attnums[col] - 1] = (datum), slot->tts_isnull[st->attnums[col] - 1] = false)
	SET(AC_FINISHED_AT, TimestampTzGetDatum(finished_at));
	SET(AC_STATE, state);
	SET(AC_SEG, Int16GetDatum(seg));
#undef SET
	ExecStoreVirtualTuple(slot);
}

/*
 * Archive n finished jobs of q directly: values[i] and nulls[i] hold the
 * carried columns of one.  Returns false, having done nothing, if the
 * archive needs the executor.
 */
static bool
archive_direct(QueueInfo *q, int n, Datum *const *values, bool *const *nulls,
			   TimestampTz finished_at)
{
	Relation	rel = QueueDirectOpen(q, true, ACL_INSERT);
	QueueDirectState *st = q->archive_direct;
	Datum		done;

	if (rel == NULL)
		return false;
	done = CStringGetTextDatum("done");
	for (int first = 0, m; first < n; first += m)
	{
		TupleTableSlot **slots;
		Size		bytes = 0;

		for (m = 0; first + m < n && m < MAX_SLOTS && bytes < MAX_BATCH_BYTES; m++)
			bytes += archive_row_bytes(values[first + m], nulls[first + m]);
		slots = get_slots(st, m);
		for (int i = 0; i < m; i++)
			fill_archive_row(st, slots[i], values[first + i], nulls[first + i], finished_at, done,
							 q->archive_seg);
		insert_rows(st, rel, slots, m);
	}
	table_close(rel, NoLock);
	return true;
}

/*
 * Archive n finished jobs of q, given as rows of carried columns: without
 * the executor if the archive allows, else in one statement.  Must be
 * called inside QueueSpiBegin.
 */
void
QueueArchiveJobs(QueueInfo *q, int n, Datum *const *values, bool *const *nulls)
{
	TimestampTz now_ts = GetCurrentTimestamp();
	Datum		args[JOB_NCARRIED + 1];

	if (n == 0 || archive_direct(q, n, values, nulls, now_ts))
		return;
	JobColumnArrays(n, values, nulls, args);
	args[JOB_NCARRIED] = TimestampTzGetDatum(now_ts);
	QueueCheckSpi(SPI_execute_plan(QueueGetPlan(q, PLAN_ARCHIVE_HELD), args, NULL, false, 0),
				  SPI_OK_INSERT, n, "archive completed jobs", q->name);
}
