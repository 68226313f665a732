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
 * Claims (take.c) use the same state for the new row versions they make,
 * and find here the ready index they scan; completions (delete.c) find the
 * index on id.
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
#include "catalog/partition.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "parser/parse_relation.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "direct.h"

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

/* Their types; state's is the extension's enum (InvalidOid here). */
static const Oid insert_col_types[IC_NCOLS] = {
	INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, InvalidOid, INT4OID, INT4OID,
	INT4OID, TEXTOID, JSONBOID
};

/* Columns of an archive row: the HELD_* column each comes from, or -1. */
typedef enum ArchiveCol
{
	AC_FINISHED_AT = 11,
	AC_STATE,
	AC_SEG,
	AC_NCOLS
} ArchiveCol;

static const char *const archive_col_names[AC_NCOLS] = {
	"id", "payload", "attempt", "group_key", "enqueued_at", "priority", "run_at",
	"dedup_key", "last_error", "history", "claimed_at", "finished_at", "state", "seg"
};

static const Oid archive_col_types[AC_NCOLS] = {
	INT8OID, JSONBOID, INT4OID, TEXTOID, TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID,
	TEXTOID, TEXTOID, JSONBOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TEXTOID, INT2OID
};

static const int archive_from_held[AC_NCOLS] = {
	HELD_ID, HELD_PAYLOAD, HELD_ATTEMPT, HELD_GROUP_KEY, HELD_ENQUEUED_AT, HELD_PRIORITY,
	HELD_RUN_AT, HELD_DEDUP_KEY, HELD_LAST_ERROR, HELD_HISTORY, HELD_CLAIMED_AT, -1, -1, -1
};

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
StaticAssertDecl((int) IC_NCOLS <= MAX_COLS && (int) AC_NCOLS <= MAX_COLS, "MAX_COLS too small");

static List *all_states = NIL;

static void
insert_relcache_callback(Datum arg, Oid relid)
{
	ListCell   *lc;

	foreach(lc, all_states)
	{
		QueueInsertState *st = (QueueInsertState *) lfirst(lc);

		if (relid == InvalidOid || relid == st->relid || relid == st->parentid)
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
 * Resolve the columns a claim without the executor uses; false (claims
 * go through SPI) if someone changed their types.
 */
static bool
claim_columns(QueueInsertState *st, Relation rel)
{
	static const char *const names[CC_NCOLS] = {
		"id", "payload", "attempt", "group_key", "enqueued_at", "lease_until", "priority",
		"rank", "run_at", "dedup_key", "last_error", "history", "uncounted", "claimed_at",
		"state", "owner_pid", "owner_start"
	};
	static const Oid types[CC_NCOLS] = {
		INT8OID, JSONBOID, INT4OID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID,
		INT8OID, TIMESTAMPTZOID, TEXTOID, TEXTOID, JSONBOID, INT4OID, TIMESTAMPTZOID,
		InvalidOid, INT4OID, TIMESTAMPTZOID
	};

	for (int c = 0; c < CC_NCOLS; c++)
	{
		AttrNumber	a = attnameAttNum(rel, names[c], false);

		if (a == InvalidAttrNumber)
			return false;
		if (types[c] != InvalidOid && TupleDescAttr(RelationGetDescr(rel), a - 1)->atttypid != types[c])
			return false;
		st->claim_attnums[c] = a;
	}
	return true;
}

/* Whether irel is the queue's valid btree on (priority DESC, rank). */
static bool
is_ready_index(QueueInsertState *st, Relation rel, Relation irel)
{
	char		name[NAMEDATALEN + 8];
	Form_pg_index ix = irel->rd_index;

	snprintf(name, sizeof(name), "%s$ready", RelationGetRelationName(rel));
	return strcmp(RelationGetRelationName(irel), name) == 0 &&
		irel->rd_rel->relam == BTREE_AM_OID && ix->indisvalid && ix->indisready &&
		ix->indnkeyatts >= 2 &&
		ix->indkey.values[0] == st->claim_attnums[CC_PRIORITY] &&
		ix->indkey.values[1] == st->claim_attnums[CC_RANK] &&
		(irel->rd_indoption[0] & INDOPTION_DESC) != 0 &&
		(irel->rd_indoption[1] & INDOPTION_DESC) == 0;
}

/* Whether irel is a valid unique btree on id alone (the primary key). */
static bool
is_id_index(QueueInsertState *st, Relation irel, IndexInfo *ii)
{
	return irel->rd_rel->relam == BTREE_AM_OID && irel->rd_index->indisvalid &&
		irel->rd_index->indisready && irel->rd_index->indimmediate && ii->ii_Unique &&
		ii->ii_NumIndexAttrs == 1 && ii->ii_Predicate == NIL && ii->ii_Expressions == NIL &&
		ii->ii_IndexAttrNumbers[0] == st->claim_attnums[CC_ID];
}

/*
 * Whether a claim leaves the keys of an index as they were: the hint
 * index_insert() takes for an update (bottom-up deletion of old versions).
 */
static bool
claim_leaves_keys(QueueInsertState *st, IndexInfo *ii)
{
	static const ClaimCol set[] = {CC_ATTEMPT, CC_LEASE_UNTIL, CC_STATE, CC_CLAIMED_AT,
	CC_OWNER_PID, CC_OWNER_START};

	if (ii->ii_Expressions != NIL)
		return false;
	for (int k = 0; k < ii->ii_NumIndexAttrs; k++)
		for (int c = 0; c < (int) lengthof(set); c++)
			if (ii->ii_IndexAttrNumbers[k] == st->claim_attnums[set[c]])
				return false;
	return true;
}

/*
 * (Re)build the state for the open relation rel (and, for an archive
 * segment, its open parent prel); false if the executor would do more for
 * it than we do.
 */
static bool
build_state(QueueInsertState *st, Relation rel, Relation prel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *indexes;
	ListCell   *lc;
	MemoryContext old;
	bool		claims;
	int			ncols = st->archive ? AC_NCOLS : IC_NCOLS;
	const char *const *names = st->archive ? archive_col_names : insert_col_names;
	const Oid  *types = st->archive ? archive_col_types : insert_col_types;

	if (rel->trigdesc != NULL || rel->rd_rel->relrowsecurity ||
		(desc->constr != NULL && (desc->constr->num_check > 0 || desc->constr->has_generated_stored)))
		return false;
	/* (statement triggers and row security of the parent stay there) */
	if (prel != NULL && (prel->trigdesc != NULL || prel->rd_rel->relrowsecurity))
		return false;

	if (st->estate)
		FreeExecutorState(st->estate);
	if (st->slots)
		for (int i = 0; i < st->nslots; i++)
			ExecDropSingleTupleTableSlot(st->slots[i]);
	if (st->scan_slot)
		ExecDropSingleTupleTableSlot(st->scan_slot);
	if (st->lock_slot)
		ExecDropSingleTupleTableSlot(st->lock_slot);
	MemoryContextReset(st->cxt);
	st->estate = NULL;
	st->slot = NULL;
	st->slots = NULL;
	st->nslots = 0;
	st->scan_slot = NULL;
	st->lock_slot = NULL;
	st->ready_index = InvalidOid;
	st->pkey_index = InvalidOid;
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
		if (TupleDescAttr(desc, st->attnums[c] - 1)->atttypid != types[c] && types[c] != InvalidOid)
		{
			MemoryContextSwitchTo(old);
			return false;		/* changed by hand: let the executor coerce */
		}
	}

	/* Columns a user added with a default or NOT NULL are for the executor. */
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);
		bool		ours = false;

		for (int c = 0; c < ncols && !ours; c++)
			ours = st->attnums[c] == att->attnum;
		if (!ours && !att->attisdropped && (att->atthasdef || att->attnotnull))
		{
			MemoryContextSwitchTo(old);
			return false;
		}
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
	claims = !st->archive && claim_columns(st, rel);
	if (claims)
	{
		st->scan_slot = MakeSingleTupleTableSlot(st->slot->tts_tupleDescriptor,
												 table_slot_callbacks(rel));
		st->lock_slot = MakeSingleTupleTableSlot(st->slot->tts_tupleDescriptor,
												 table_slot_callbacks(rel));
	}
	indexes = RelationGetIndexList(rel);
	st->nindexes = list_length(indexes);
	st->indexoids = palloc(sizeof(Oid) * Max(st->nindexes, 1));
	st->indexinfos = palloc(sizeof(IndexInfo *) * Max(st->nindexes, 1));
	st->predicates = palloc0(sizeof(ExprState *) * Max(st->nindexes, 1));
	st->claim_unchanged = palloc0(sizeof(bool) * Max(st->nindexes, 1));
	foreach(lc, indexes)
	{
		int			i = foreach_current_index(lc);
		Relation	irel = index_open(lfirst_oid(lc), AccessShareLock);
		IndexInfo  *ii = BuildIndexInfo(irel);
		bool		immediate = irel->rd_index->indimmediate;

		if (claims && is_ready_index(st, rel, irel))
			st->ready_index = lfirst_oid(lc);
		if (claims && is_id_index(st, irel, ii))
			st->pkey_index = lfirst_oid(lc);
		index_close(irel, AccessShareLock);
		if (ii->ii_ExclusionOps != NULL || !immediate)
		{
			MemoryContextSwitchTo(old);
			return false;
		}
		st->claim_unchanged[i] = claims && claim_leaves_keys(st, ii);
		/* (not ready: CREATE INDEX CONCURRENTLY has yet to build it) */
		if (!ii->ii_ReadyForInserts)
			ii = NULL;
		st->indexoids[i] = lfirst_oid(lc);
		st->indexinfos[i] = ii;
		if (ii != NULL && ii->ii_Predicate != NIL)
			st->predicates[i] = ExecPrepareQual(ii->ii_Predicate, st->estate);
	}
	MemoryContextSwitchTo(old);
	st->valid = true;
	return true;
}

/*
 * Open the table of *stp (q's hot table, or the current segment of its
 * archive), making or rebuilding the state.  NULL if the table needs the
 * executor, or if the user lacks a privilege of mode on the whole table
 * (then the executor checks column privileges, or fails).  An archive
 * segment is written as the executor would write it through the archive,
 * which is what privileges are checked on and locked first.  In a
 * read-only transaction the executor refuses the write, as it should.
 */
static Relation
open_target(QueueInsertState **stp, QueueInfo *q, bool archive, AclMode mode)
{
	QueueInsertState *st = *stp;
	Relation	rel;
	Oid			aclid;

	if (XactReadOnly)
		return NULL;
	if (st == NULL)
	{
		char		tname[NAMEDATALEN + 4];
		Oid			nsp = get_namespace_oid("queue", false);
		MemoryContext old = MemoryContextSwitchTo(CacheMemoryContext);

		st = palloc0(sizeof(QueueInsertState));
		snprintf(tname, sizeof(tname), "%s_%s", archive ? "a" : "q", q->name);
		st->relid = get_relname_relid(tname, nsp);
		if (archive)
		{
			char		sname[NAMEDATALEN + 12];

			snprintf(sname, sizeof(sname), "%s$%d", tname, q->archive_seg);
			st->parentid = st->relid;
			st->relid = get_relname_relid(sname, nsp);
		}
		st->archive = archive;
		st->cxt = AllocSetContextCreate(CacheMemoryContext, "queue insert", ALLOCSET_SMALL_SIZES);
		all_states = lappend(all_states, st);
		MemoryContextSwitchTo(old);
		*stp = st;
	}
	if (!OidIsValid(st->relid))
		return NULL;

	/* (pg_class_aclcheck() wants any of the bits, we want all) */
	aclid = st->archive ? st->parentid : st->relid;
	for (AclMode one = 1; one <= mode; one <<= 1)
		if ((mode & one) != 0 && pg_class_aclcheck(aclid, GetUserId(), one) != ACLCHECK_OK)
			return NULL;

	if (st->archive)
		LockRelationOid(st->parentid, RowExclusiveLock);
	rel = table_open(st->relid, RowExclusiveLock);
	if (!st->valid)
	{
		bool		ok;

		if (st->archive)
		{
			Relation	prel = table_open(st->parentid, NoLock);

			ok = rel->rd_rel->relispartition &&
				get_partition_parent(st->relid, false) == st->parentid &&
				build_state(st, rel, prel);
			table_close(prel, NoLock);
		}
		else
			ok = build_state(st, rel, NULL);
		if (!ok)
		{
			table_close(rel, RowExclusiveLock);
			return NULL;
		}
	}
	return rel;
}

/*
 * Open q's hot table and begin a scan of its ready index (or, by_id, of
 * its primary key) with room for nkeys keys, for a statement of type cmd
 * (UPDATE or DELETE) that changes the rows it finds.  The scan sees what
 * this transaction did so far, from a fresh snapshot, as SPI would give a
 * statement.  Returns false, having done nothing, if the table needs SPI.
 */
bool
QueueDirectScanBegin(QueueDirectScan *ds, QueueInfo *q, CmdType cmd, bool by_id, int nkeys)
{
	Oid			indexoid;

	ds->rel = open_target(&q->insert, q, false,
							  ACL_SELECT | (cmd == CMD_UPDATE ? ACL_UPDATE : ACL_DELETE));
	if (ds->rel == NULL)
		return false;
	ds->st = q->insert;
	indexoid = by_id ? ds->st->pkey_index : ds->st->ready_index;
	if (!OidIsValid(indexoid))
	{
		table_close(ds->rel, NoLock);
		return false;
	}
	/* what the executor checks before it changes a published table */
	CheckCmdReplicaIdentity(ds->rel, cmd);

	CommandCounterIncrement();
	ds->snap = RegisterSnapshot(GetTransactionSnapshot());
	ds->cid = GetCurrentCommandId(true);
	ds->index = index_open(indexoid, AccessShareLock);
	ds->scan = index_beginscan(ds->rel, ds->index, ds->snap, nkeys, 0);
	return true;
}

void
QueueDirectScanEnd(QueueDirectScan *ds)
{
	index_endscan(ds->scan);
	index_close(ds->index, NoLock);
	ExecClearTuple(ds->st->scan_slot);
	if (ds->st->lock_slot)
		ExecClearTuple(ds->st->lock_slot);
	ExecClearTuple(ds->st->slot);
	UnregisterSnapshot(ds->snap);
	table_close(ds->rel, NoLock);
}

/*
 * The index entries of the n rows just inserted from slots, or of the new
 * version a claim made (update), as the executor makes them.  Each index
 * is opened once for all the rows: a bulk enqueue of 10,000 jobs otherwise
 * opens and closes an index (a lock and a relcache look-up) 20,000 times
 * or more.
 */
void
QueueDirectIndexEntries(QueueInsertState *st, Relation rel, TupleTableSlot **slots, int n,
						bool update)
{
	ExprContext *econtext;

	if (st->nindexes == 0)
		return;
	econtext = GetPerTupleExprContext(st->estate);
	for (int i = 0; i < st->nindexes; i++)
	{
		IndexInfo  *ii = st->indexinfos[i];
		Relation	irel = NULL;

		if (ii == NULL)
			continue;
		for (int r = 0; r < n; r++)
		{
			econtext->ecxt_scantuple = slots[r];
			if (st->predicates[i] == NULL || ExecQual(st->predicates[i], econtext))
			{
				Datum		values[INDEX_MAX_KEYS];
				bool		isnull[INDEX_MAX_KEYS];

				if (irel == NULL)
					irel = index_open(st->indexoids[i], RowExclusiveLock);
				FormIndexDatum(ii, slots[r], st->estate, values, isnull);
				index_insert(irel, values, isnull, &slots[r]->tts_tid, rel,
							 ii->ii_Unique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO,
							 update && st->claim_unchanged[i], ii);
			}
			ResetExprContext(econtext);
		}
		if (irel != NULL)
			index_close(irel, NoLock);
	}
}

/* A new job's row in slot. */
static void
fill_job(QueueInsertState *st, TupleTableSlot *slot, int64 id, TimestampTz run_at, QueueState state,
		 int32 priority, text *group_key, Datum payload)
{
	ExecClearTuple(slot);
	for (int c = 0; c < slot->tts_tupleDescriptor->natts; c++)
		slot->tts_isnull[c] = true;
#define SET(col, datum) \
	(slot->tts_values[st->attnums[col] - 1] = (datum), slot->tts_isnull[st->attnums[col] - 1] = false)
	SET(IC_ID, Int64GetDatum(id));
	SET(IC_RANK, Int64GetDatum(id / QUEUE_ID_FACTOR));
	SET(IC_RUN_AT, TimestampTzGetDatum(run_at));
	SET(IC_ENQUEUED_AT, TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()));
	SET(IC_STATE, st->states[state]);
	SET(IC_PRIORITY, Int32GetDatum(priority));
	SET(IC_ATTEMPT, Int32GetDatum(0));
	SET(IC_UNCOUNTED, Int32GetDatum(0));
	if (group_key != NULL)
		SET(IC_GROUP_KEY, PointerGetDatum(group_key));
	SET(IC_PAYLOAD, payload);
#undef SET
	ExecStoreVirtualTuple(slot);
}

/* At least n (at most MAX_SLOTS) slots for table_multi_insert. */
static TupleTableSlot **
get_slots(QueueInsertState *st, int n)
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
insert_rows(QueueInsertState *st, Relation rel, TupleTableSlot **slots, int n)
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
QueueInsertJob(QueueInfo *q, int64 id, TimestampTz run_at, QueueState state,
			   int32 priority, text *group_key, Jsonb *payload)
{
	Relation	rel = open_target(&q->insert, q, false, ACL_INSERT);

	if (rel == NULL)
		return false;
	fill_job(q->insert, q->insert->slot, id, run_at, state, priority, group_key, JsonbPGetDatum(payload));
	insert_rows(q->insert, rel, &q->insert->slot, 1);
	table_close(rel, NoLock);
	return true;
}

/*
 * Insert n jobs into q's table: the first in first_state, the others in
 * state.  Returns false, having done nothing, if this table needs the
 * executor.
 */
bool
QueueInsertJobs(QueueInfo *q, int n, const Datum *ids, TimestampTz run_at, QueueState first_state,
				QueueState state, int32 priority, text *group_key, const Datum *payloads)
{
	Relation	rel = open_target(&q->insert, q, false, ACL_INSERT);

	if (rel == NULL)
		return false;
	for (int first = 0, m; first < n; first += m)
	{
		TupleTableSlot **slots;
		Size		bytes = 0;

		for (m = 0; first + m < n && m < MAX_SLOTS && bytes < MAX_BATCH_BYTES; m++)
			bytes += VARSIZE_ANY(DatumGetPointer(payloads[first + m]));
		slots = get_slots(q->insert, m);

		for (int i = 0; i < m; i++)
			fill_job(q->insert, slots[i], DatumGetInt64(ids[first + i]), run_at,
					 first + i == 0 ? first_state : state, priority, group_key, payloads[first + i]);
		insert_rows(q->insert, rel, slots, m);
	}
	table_close(rel, NoLock);
	return true;
}

/* The bytes of an archive row's variable-length values (held.c's columns). */
static Size
held_row_bytes(const Datum *values, const bool *nulls)
{
	Size		bytes = 0;

	for (int c = 0; c < AC_NCOLS; c++)
	{
		int			h = archive_from_held[c];

		if (h >= 0 && !nulls[h] && (archive_col_types[c] == TEXTOID || archive_col_types[c] == JSONBOID))
			bytes += VARSIZE_ANY(DatumGetPointer(values[h]));
	}
	return bytes;
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
	Relation	rel = open_target(&q->archive_insert, q, true, ACL_INSERT);
	QueueInsertState *st = q->archive_insert;
	Datum		done = CStringGetTextDatum("done");

	if (rel == NULL)
		return false;
	for (int first = 0, m; first < n; first += m)
	{
		TupleTableSlot **slots;
		Size		bytes = 0;

		for (m = 0; first + m < n && m < MAX_SLOTS && bytes < MAX_BATCH_BYTES; m++)
			bytes += held_row_bytes(values[first + m], nulls[first + m]);
		slots = get_slots(st, m);

		for (int i = 0; i < m; i++)
		{
			TupleTableSlot *slot = slots[i];

			ExecClearTuple(slot);
			for (int c = 0; c < slot->tts_tupleDescriptor->natts; c++)
				slot->tts_isnull[c] = true;
			for (int c = 0; c < AC_NCOLS; c++)
			{
				AttrNumber	a = st->attnums[c] - 1;
				int			h = archive_from_held[c];

				if (h >= 0)
				{
					slot->tts_values[a] = values[first + i][h];
					slot->tts_isnull[a] = nulls[first + i][h];
				}
			}
			slot->tts_values[st->attnums[AC_FINISHED_AT] - 1] = TimestampTzGetDatum(finished_at);
			slot->tts_isnull[st->attnums[AC_FINISHED_AT] - 1] = false;
			slot->tts_values[st->attnums[AC_STATE] - 1] = done;
			slot->tts_isnull[st->attnums[AC_STATE] - 1] = false;
			slot->tts_values[st->attnums[AC_SEG] - 1] = Int16GetDatum(q->archive_seg);
			slot->tts_isnull[st->attnums[AC_SEG] - 1] = false;
			ExecStoreVirtualTuple(slot);
		}
		insert_rows(st, rel, slots, m);
	}
	table_close(rel, NoLock);
	return true;
}
