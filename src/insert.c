/*-------------------------------------------------------------------------
 *
 * insert.c
 *	  Inserting one job without the executor: the enqueue hot path.
 *
 * An INSERT through SPI pays, on every call, for what never changes from
 * one job to the next: revalidating the plan, starting an executor, and
 * compiling the predicates of the queue table's partial indexes.  For a
 * one-row insert that is most of the work.  So each backend keeps, per
 * queue, the table's index list with their predicates compiled once, and
 * inserts the heap tuple and its index entries directly, as the executor
 * would.
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

struct QueueInsertState
{
	Oid			relid;
	bool		valid;
	MemoryContext cxt;
	EState	   *estate;			/* long-lived, for the compiled predicates */
	TupleTableSlot *slot;
	AttrNumber	attnums[IC_NCOLS];
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
	Oid			enumtype;

	if (rel->trigdesc != NULL || rel->rd_rel->relrowsecurity)
		return false;

	MemoryContextReset(st->cxt);
	st->estate = NULL;
	st->slot = NULL;
	old = MemoryContextSwitchTo(st->cxt);

	for (int c = 0; c < IC_NCOLS; c++)
	{
		st->attnums[c] = attnameAttNum(rel, insert_col_names[c], false);
		if (st->attnums[c] == InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of queue table \"%s\" is missing", insert_col_names[c],
							RelationGetRelationName(rel)),
					 errhint("The queue's table was changed by hand; drop and re-create the queue.")));
	}
	enumtype = TupleDescAttr(desc, st->attnums[IC_STATE] - 1)->atttypid;
	for (int i = 0; i < QS_NSTATES; i++)
	{
		static const char *const names[QS_NSTATES] = {"ready", "scheduled", "running", "dead", "waiting"};

		st->states[i] = DirectFunctionCall2(enum_in, CStringGetDatum(names[i]),
											ObjectIdGetDatum(enumtype));
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
 * Insert one job into q's table.  Returns false, having done nothing, if
 * this table needs the executor (the caller then uses SPI).
 */
bool
QueueInsertJob(QueueInfo *q, int64 id, int64 rank, TimestampTz run_at, QueueState state,
			   int32 priority, text *group_key, Jsonb *payload)
{
	QueueInsertState *st = q->insert;
	Relation	rel;
	TupleTableSlot *slot;
	ExprContext *econtext;
	AclResult	aclresult;

	if (st == NULL)
	{
		char		tname[NAMEDATALEN + 4];
		MemoryContext old = MemoryContextSwitchTo(CacheMemoryContext);

		st = palloc0(sizeof(QueueInsertState));
		snprintf(tname, sizeof(tname), "q_%s", q->name);
		st->relid = get_relname_relid(tname, get_namespace_oid("queue", false));
		st->cxt = AllocSetContextCreate(CacheMemoryContext, "queue insert", ALLOCSET_SMALL_SIZES);
		all_states = lappend(all_states, st);
		MemoryContextSwitchTo(old);
		q->insert = st;
	}
	if (!OidIsValid(st->relid))
		return false;

	aclresult = pg_class_aclcheck(st->relid, GetUserId(), ACL_INSERT);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_TABLE, get_rel_name(st->relid));

	rel = table_open(st->relid, RowExclusiveLock);
	if (!st->valid && !build_state(st, rel))
	{
		table_close(rel, RowExclusiveLock);
		return false;
	}

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
	table_close(rel, NoLock);
	return true;
}
