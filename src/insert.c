/*-------------------------------------------------------------------------
 *
 * insert.c
 *	  Inserting rows without the executor: one job at enqueue (the hot
 *	  path of producers), and finished jobs into the archive at complete.
 *
 * An INSERT through SPI pays, on every call, for what never changes from
 * one job to the next: revalidating the plan, starting an executor, and
 * compiling the predicates of the queue table's partial indexes.  For a
 * one-row insert that is most of the work.  So each backend keeps, per
 * queue, the table's index list with their predicates compiled once, and
 * inserts the heap tuple and its index entries directly, as the executor
 * would.
 *
 * Archive rows are inserted the same way, many at once with
 * table_multi_insert, which logs one WAL record per page instead of one per
 * row: an archive keeps every job a queue ever finished, so its insert is
 * on the consumers' hot path too.
 *
 * The state is rebuilt whenever the table's relcache entry is invalidated
 * (someone added an index, say).  Tables on which the executor would do
 * more than this (triggers, row security, exclusion constraints) are not
 * handled here: the caller falls back to SPI.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "parser/parse_relation.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "queue.h"

/* Columns of queue._job that an enqueue sets. */
typedef enum InsertCol
{
	IC_ID,
	IC_RANK,
	IC_RUN_AT,
	IC_ENQUEUED_AT,
	IC_STATE,
	IC_PRIORITY,
	IC_ATTEMPT,
	IC_UNCOUNTED,
	IC_GROUP_KEY,
	IC_PAYLOAD,
	IC_NCOLS
} InsertCol;

static const char *const insert_col_names[IC_NCOLS] = {
	"id", "rank", "run_at", "enqueued_at", "state", "priority", "attempt",
	"uncounted", "group_key", "payload"
};

/* Columns of an archive row: the HELD_* column each comes from, or -1. */
typedef enum ArchiveCol
{
	AC_FINISHED_AT = 11,
	AC_STATE,
	AC_NCOLS
} ArchiveCol;

static const char *const archive_col_names[AC_NCOLS] = {
	"id", "payload", "attempt", "group_key", "enqueued_at", "priority", "run_at",
	"dedup_key", "last_error", "history", "claimed_at", "finished_at", "state"
};

static const int archive_from_held[AC_NCOLS] = {
	HELD_ID, HELD_PAYLOAD, HELD_ATTEMPT, HELD_GROUP_KEY, HELD_ENQUEUED_AT, HELD_PRIORITY,
	HELD_RUN_AT, HELD_DEDUP_KEY, HELD_LAST_ERROR, HELD_HISTORY, HELD_CLAIMED_AT, -1, -1
};

#define MAX_COLS	16
StaticAssertDecl((int) IC_NCOLS <= MAX_COLS && (int) AC_NCOLS <= MAX_COLS, "MAX_COLS too small");

struct QueueInsertState
{
	Oid			relid;
	bool		archive;		/* the archive table, not the hot one */
	bool		valid;
	MemoryContext cxt;
	EState	   *estate;			/* long-lived, for the compiled predicates */
	TupleTableSlot *slot;
	TupleTableSlot **slots;		/* archive: for table_multi_insert */
	int			nslots;
	AttrNumber	attnums[MAX_COLS];
	int			nindexes;
	Oid		   *indexoids;
	IndexInfo **indexinfos;
	ExprState **predicates;
	Datum		states[QS_NSTATES]; /* enum values of queue.job_state */
};

static List *all_states = NIL;

static void
insert_relcache_callback(Datum arg, Oid relid)
{
	ListCell   *lc;

	foreach(lc, all_states)
	{
		QueueInsertState *st = (QueueInsertState *) lfirst(lc);

		if (relid == InvalidOid || relid == st->relid)
			st->valid = false;
	}
}

void
QueueInsertInit(void)
{
	CacheRegisterRelcacheCallback(insert_relcache_callback, (Datum) 0);
}

/* Drop a queue's insert state (its QueueInfo is going away). */
void
QueueInsertForget(QueueInsertState *st)
{
	if (st == NULL)
		return;
	all_states = list_delete_ptr(all_states, st);
	if (st->estate)
		FreeExecutorState(st->estate);
	MemoryContextDelete(st->cxt);
}

/*
 * (Re)build the state for the open relation rel; false if the executor
 * would do more for it than we do.
 */
static bool
build_state(QueueInsertState *st, Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *indexes;
	ListCell   *lc;
	MemoryContext old;
	int			ncols = st->archive ? AC_NCOLS : IC_NCOLS;
	const char *const *names = st->archive ? archive_col_names : insert_col_names;

	if (rel->trigdesc != NULL || rel->rd_rel->relrowsecurity)
		return false;

	if (st->estate)
		FreeExecutorState(st->estate);
	if (st->slots)
		for (int i = 0; i < st->nslots; i++)
			ExecDropSingleTupleTableSlot(st->slots[i]);
	MemoryContextReset(st->cxt);
	st->estate = NULL;
	st->slot = NULL;
	st->slots = NULL;
	st->nslots = 0;
	old = MemoryContextSwitchTo(st->cxt);

	for (int c = 0; c < ncols; c++)
	{
		st->attnums[c] = attnameAttNum(rel, names[c], false);
		if (st->attnums[c] == InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of queue table \"%s\" is missing", names[c],
							RelationGetRelationName(rel)),
					 errhint("The queue's table was changed by hand; drop and re-create the queue.")));
	}
	if (!st->archive)
	{
		Oid			enumtype = TupleDescAttr(desc, st->attnums[IC_STATE] - 1)->atttypid;

		for (int i = 0; i < QS_NSTATES; i++)
		{
			static const char *const states[QS_NSTATES] = {"ready", "scheduled", "running", "dead", "waiting"};

			st->states[i] = DirectFunctionCall2(enum_in, CStringGetDatum(states[i]),
												ObjectIdGetDatum(enumtype));
		}
	}

	st->estate = CreateExecutorState();
	st->slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(desc), &TTSOpsVirtual);
	indexes = RelationGetIndexList(rel);
	st->nindexes = list_length(indexes);
	st->indexoids = palloc(sizeof(Oid) * Max(st->nindexes, 1));
	st->indexinfos = palloc(sizeof(IndexInfo *) * Max(st->nindexes, 1));
	st->predicates = palloc0(sizeof(ExprState *) * Max(st->nindexes, 1));
	foreach(lc, indexes)
	{
		int			i = foreach_current_index(lc);
		Relation	irel = index_open(lfirst_oid(lc), AccessShareLock);
		IndexInfo  *ii = BuildIndexInfo(irel);
		bool		immediate = irel->rd_index->indimmediate;

		index_close(irel, AccessShareLock);
		if (ii->ii_ExclusionOps != NULL || !immediate)
		{
			MemoryContextSwitchTo(old);
			return false;
		}
		st->indexoids[i] = lfirst_oid(lc);
		st->indexinfos[i] = ii;
		if (ii->ii_Predicate != NIL)
			st->predicates[i] = ExecPrepareQual(ii->ii_Predicate, st->estate);
	}
	MemoryContextSwitchTo(old);
	st->valid = true;
	return true;
}

/*
 * Open the table of *stp (q's hot table, or its archive), making or
 * rebuilding the state.  NULL if the table needs the executor.
 */
static Relation
open_target(QueueInsertState **stp, QueueInfo *q, bool archive)
{
	QueueInsertState *st = *stp;
	Relation	rel;
	AclResult	aclresult;

	if (st == NULL)
	{
		char		tname[NAMEDATALEN + 4];
		MemoryContext old = MemoryContextSwitchTo(CacheMemoryContext);

		st = palloc0(sizeof(QueueInsertState));
		snprintf(tname, sizeof(tname), "%s_%s", archive ? "a" : "q", q->name);
		st->relid = get_relname_relid(tname, get_namespace_oid("queue", false));
		st->archive = archive;
		st->cxt = AllocSetContextCreate(CacheMemoryContext, "queue insert", ALLOCSET_SMALL_SIZES);
		all_states = lappend(all_states, st);
		MemoryContextSwitchTo(old);
		*stp = st;
	}
	if (!OidIsValid(st->relid))
		return NULL;

	aclresult = pg_class_aclcheck(st->relid, GetUserId(), ACL_INSERT);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_TABLE, get_rel_name(st->relid));

	rel = table_open(st->relid, RowExclusiveLock);
	if (!st->valid && !build_state(st, rel))
	{
		table_close(rel, RowExclusiveLock);
		return NULL;
	}
	return rel;
}

/* The index entries of a row just inserted from slot, as the executor makes them. */
static void
insert_index_entries(QueueInsertState *st, Relation rel, TupleTableSlot *slot)
{
	ExprContext *econtext;

	if (st->nindexes == 0)
		return;
	econtext = GetPerTupleExprContext(st->estate);
	econtext->ecxt_scantuple = slot;
	for (int i = 0; i < st->nindexes; i++)
	{
		IndexInfo  *ii = st->indexinfos[i];
		Relation	irel;
		Datum		values[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];

		if (st->predicates[i] != NULL && !ExecQual(st->predicates[i], econtext))
			continue;
		irel = index_open(st->indexoids[i], RowExclusiveLock);
		FormIndexDatum(ii, slot, st->estate, values, isnull);
		index_insert(irel, values, isnull, &slot->tts_tid, rel,
					 ii->ii_Unique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO, false, ii);
		index_close(irel, NoLock);
	}
	ResetExprContext(econtext);
}

/*
 * Insert one job into q's table.  Returns false, having done nothing, if
 * this table needs the executor (the caller then uses SPI).
 */
bool
QueueInsertJob(QueueInfo *q, int64 id, int64 rank, TimestampTz run_at, QueueState state,
			   int32 priority, text *group_key, Jsonb *payload)
{
	QueueInsertState *st;
	Relation	rel = open_target(&q->insert, q, false);
	TupleTableSlot *slot;

	if (rel == NULL)
		return false;
	st = q->insert;
	slot = st->slot;
	ExecClearTuple(slot);
	for (int c = 0; c < slot->tts_tupleDescriptor->natts; c++)
		slot->tts_isnull[c] = true;
#define SET(col, datum) \
	(slot->tts_values[st->attnums[col] - 1] = (datum), slot->tts_isnull[st->attnums[col] - 1] = false)
	SET(IC_ID, Int64GetDatum(id));
	SET(IC_RANK, Int64GetDatum(rank));
	SET(IC_RUN_AT, TimestampTzGetDatum(run_at));
	SET(IC_ENQUEUED_AT, TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()));
	SET(IC_STATE, st->states[state]);
	SET(IC_PRIORITY, Int32GetDatum(priority));
	SET(IC_ATTEMPT, Int32GetDatum(0));
	SET(IC_UNCOUNTED, Int32GetDatum(0));
	if (group_key != NULL)
		SET(IC_GROUP_KEY, PointerGetDatum(group_key));
	SET(IC_PAYLOAD, JsonbPGetDatum(payload));
#undef SET
	ExecStoreVirtualTuple(slot);

	table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, NULL);
	insert_index_entries(st, rel, slot);
	table_close(rel, NoLock);
	return true;
}

/*
 * Archive n finished jobs of q: values[i] and nulls[i] hold the HELD_*
 * columns of one (see held.c).  Returns false, having done nothing, if the
 * archive needs the executor (the caller then uses SPI).
 */
bool
QueueArchiveRows(QueueInfo *q, int n, Datum *const *values, bool *const *nulls,
				 TimestampTz finished_at)
{
	Relation	rel = open_target(&q->archive_insert, q, true);
	QueueInsertState *st = q->archive_insert;
	Datum		done = CStringGetTextDatum("done");

	if (rel == NULL)
		return false;
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

	for (int i = 0; i < n; i++)
	{
		TupleTableSlot *slot = st->slots[i];

		ExecClearTuple(slot);
		for (int c = 0; c < slot->tts_tupleDescriptor->natts; c++)
			slot->tts_isnull[c] = true;
		for (int c = 0; c < AC_NCOLS; c++)
		{
			AttrNumber	a = st->attnums[c] - 1;
			int			h = archive_from_held[c];

			if (h >= 0)
			{
				slot->tts_values[a] = values[i][h];
				slot->tts_isnull[a] = nulls[i][h];
			}
		}
		slot->tts_values[st->attnums[AC_FINISHED_AT] - 1] = TimestampTzGetDatum(finished_at);
		slot->tts_isnull[st->attnums[AC_FINISHED_AT] - 1] = false;
		slot->tts_values[st->attnums[AC_STATE] - 1] = done;
		slot->tts_isnull[st->attnums[AC_STATE] - 1] = false;
		ExecStoreVirtualTuple(slot);
	}

	table_multi_insert(rel, st->slots, n, GetCurrentCommandId(true), 0, NULL);
	for (int i = 0; i < n; i++)
	{
		insert_index_entries(st, rel, st->slots[i]);
		ExecClearTuple(st->slots[i]);
	}
	table_close(rel, NoLock);
	return true;
}
