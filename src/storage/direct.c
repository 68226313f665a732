/*-------------------------------------------------------------------------
 *
 * direct.c
 *	  The state for writing a queue's rows without the executor: its
 *	  columns, its indexes with their predicates compiled once, and the
 *	  slots to fill.  Shared by storage/insert.c, claimrows.c and delete.c.
 *
 * An INSERT, UPDATE or DELETE through SPI pays, on every call, for what
 * never changes from one job to the next: revalidating the plan, starting
 * an executor, and compiling the predicates of the queue table's partial
 * indexes.  For a one-row statement that is most of the work.  So each
 * backend keeps, per queue (QueueInfo's direct and archive_direct), the
 * table's index list with their predicates compiled once, and changes the
 * heap tuples and their index entries directly, as the executor would.
 *
 * The state is rebuilt whenever the table's relcache entry is invalidated
 * (someone added an index, say).  Tables on which the executor would do
 * more than this (triggers, row security, CHECK constraints other than
 * the id's own, exclusion constraints, deferred uniqueness, columns
 * changed or added by hand) are not handled here: the callers fall back
 * to SPI.
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
#include "miscadmin.h"
#include "parser/parse_relation.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/snapmgr.h"

#include "base/jobid.h"
#include "storage/direct.h"

static List *all_states = NIL;

static void
direct_relcache_callback(Datum arg, Oid relid)
{
	ListCell   *lc;

	foreach(lc, all_states)
	{
		QueueDirectState *st = (QueueDirectState *) lfirst(lc);

		if (relid == InvalidOid || relid == st->relid || relid == st->parentid)
			st->valid = false;
	}
}

void
QueueDirectInit(void)
{
	CacheRegisterRelcacheCallback(direct_relcache_callback, (Datum) 0);
}

static void
release_state(QueueDirectState *st)
{
	if (st == NULL)
		return;
	all_states = list_delete_ptr(all_states, st);
	if (st->estate)
		FreeExecutorState(st->estate);
	MemoryContextDelete(st->cxt);
}

/* The queue's entry in the cache goes: what we keep for it goes too. */
void
QueueDirectRelease(QueueInfo *q)
{
	release_state(q->direct);
	release_state(q->archive_direct);
	q->direct = q->archive_direct = NULL;
}

/* The columns of the table, their names and types (InvalidOid: any). */
static int
table_columns(QueueDirectState *st, const char **names, Oid *types)
{
	if (st->archive)
	{
		for (int c = 0; c < AC_NCOLS; c++)
		{
			names[c] = ArchiveColumnName((ArchiveCol) c);
			types[c] = ArchiveColumnType((ArchiveCol) c);
		}
		return AC_NCOLS;
	}
	for (int c = 0; c < JC_NCOLS; c++)
	{
		names[c] = job_columns[c].name;
		types[c] = job_columns[c].type;
	}
	return JC_NCOLS;
}

/*
 * Whether a row we insert sets column attnum: every archive column, and
 * the hot table's columns an enqueue sets.
 */
static bool
inserts_column(QueueDirectState *st, AttrNumber attnum)
{
	for (int c = 0; c < (st->archive ? AC_NCOLS : JC_NCOLS); c++)
		if (st->attnums[c] == attnum &&
			(st->archive || (job_columns[c].flags & JOB_COL_ENQUEUE) != 0))
			return true;
	return false;
}

/*
 * Resolve the table's columns into st->attnums; false if someone changed
 * their types (the executor coerces), or added columns with a default or
 * NOT NULL that our inserts would not fill.  A missing column is an error.
 */
static bool
resolve_columns(QueueDirectState *st, Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	const char *names[MAX_COLS];
	Oid			types[MAX_COLS];
	int			ncols = table_columns(st, names, types);

	for (int c = 0; c < ncols; c++)
	{
		st->attnums[c] = attnameAttNum(rel, names[c], false);
		if (st->attnums[c] == InvalidAttrNumber)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of queue table \"%s\" is missing", names[c],
							RelationGetRelationName(rel)),
					 errhint("The queue's table was changed by hand; drop and re-create the queue.")));
		if (types[c] != InvalidOid && TupleDescAttr(desc, st->attnums[c] - 1)->atttypid != types[c])
			return false;
	}
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		if (!att->attisdropped && (att->atthasdef || att->attnotnull) &&
			!inserts_column(st, att->attnum))
			return false;
	}
	if (!st->archive)
	{
		Oid			enumtype = TupleDescAttr(desc, st->attnums[JC_STATE] - 1)->atttypid;

		for (int i = 0; i < JS_NSTATES; i++)
			st->states[i] = DirectFunctionCall2(enum_in, CStringGetDatum(job_state_names[i]),
												ObjectIdGetDatum(enumtype));
	}
	return true;
}

/* Whether irel is the queue's valid btree on (priority DESC, rank). */
static bool
is_ready_index(QueueDirectState *st, Relation rel, Relation irel)
{
	char		name[NAMEDATALEN + 8];
	Form_pg_index ix = irel->rd_index;

	snprintf(name, sizeof(name), "%s$ready", RelationGetRelationName(rel));
	return strcmp(RelationGetRelationName(irel), name) == 0 &&
		irel->rd_rel->relam == BTREE_AM_OID && ix->indisvalid && ix->indisready &&
		ix->indnkeyatts >= 2 &&
		ix->indkey.values[0] == st->attnums[JC_PRIORITY] &&
		ix->indkey.values[1] == st->attnums[JC_RANK] &&
		(irel->rd_indoption[0] & INDOPTION_DESC) != 0 &&
		(irel->rd_indoption[1] & INDOPTION_DESC) == 0;
}

/* Whether irel is a valid unique btree on id alone (the primary key). */
static bool
is_id_index(QueueDirectState *st, Relation irel, IndexInfo *ii)
{
	return irel->rd_rel->relam == BTREE_AM_OID && irel->rd_index->indisvalid &&
		irel->rd_index->indisready && irel->rd_index->indimmediate && ii->ii_Unique &&
		ii->ii_NumIndexAttrs == 1 && ii->ii_Predicate == NIL && ii->ii_Expressions == NIL &&
		ii->ii_IndexAttrNumbers[0] == st->attnums[JC_ID];
}

/*
 * Whether a claim leaves the keys of an index as they were: the hint
 * index_insert() takes for an update (bottom-up deletion of old versions).
 */
static bool
claim_leaves_keys(QueueDirectState *st, IndexInfo *ii)
{
	static const JobCol set[] = {JC_ATTEMPT, JC_LEASE_UNTIL, JC_STATE, JC_CLAIMED_AT,
	JC_OWNER_PID, JC_OWNER_START};

	if (ii->ii_Expressions != NIL)
		return false;
	for (int k = 0; k < ii->ii_NumIndexAttrs; k++)
		for (int c = 0; c < (int) lengthof(set); c++)
			if (ii->ii_IndexAttrNumbers[k] == st->attnums[set[c]])
				return false;
	return true;
}

/*
 * The table's indexes, with their predicates compiled; false if one is
 * something only the executor maintains (exclusion, deferred uniqueness).
 * In st->cxt.
 */
static bool
resolve_indexes(QueueDirectState *st, Relation rel)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;

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

		if (!st->archive && is_ready_index(st, rel, irel))
			st->ready_index = lfirst_oid(lc);
		if (!st->archive && is_id_index(st, irel, ii))
			st->pkey_index = lfirst_oid(lc);
		index_close(irel, AccessShareLock);
		if (ii->ii_ExclusionOps != NULL || !immediate)
			return false;
		st->claim_unchanged[i] = !st->archive && claim_leaves_keys(st, ii);
		/* (not ready: CREATE INDEX CONCURRENTLY has yet to build it) */
		if (!ii->ii_ReadyForInserts)
			ii = NULL;
		st->indexoids[i] = lfirst_oid(lc);
		st->indexinfos[i] = ii;
		if (ii != NULL && ii->ii_Predicate != NIL)
			st->predicates[i] = ExecPrepareQual(ii->ii_Predicate, st->estate);
	}
	return true;
}

/* Drop what a state built before holds. */
static void
reset_state(QueueDirectState *st)
{
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
}

/*
 * Has the open hot table rel no CHECK constraint but the one queue.create
 * gives it, "<table>$id" (the id names the queue)?  The ids we write come
 * from the queue's sequence and pass it; any other CHECK, or ours changed
 * by the table's owner, needs the executor.  The constraint is compared as
 * pg_get_constraintdef prints it, whatever text it was made from.
 */
static bool
only_id_check(QueueDirectState *st, Relation rel)
{
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	const char *relname = RelationGetRelationName(rel);
	ConstrCheck *check;
	char	   *expr;

	if (constr == NULL || constr->num_check == 0)
		return true;
	check = &constr->check[0];
	if (constr->num_check != 1 || !check->ccvalid ||
		strcmp(check->ccname, psprintf("%s$id", relname)) != 0)
		return false;
	expr = deparse_expression(stringToNode(check->ccbin),
							  deparse_context_for(relname, RelationGetRelid(rel)), false, false);
	return strcmp(expr, psprintf("((id %% (" JOB_ID_FACTOR_SQL ")::bigint) = %d)", st->qno)) == 0;
}

/*
 * (Re)build the state for the open relation rel (and, for an archive
 * segment, its open parent prel); false if the executor would do more for
 * it than we do.
 */
static bool
build_state(QueueDirectState *st, Relation rel, Relation prel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	MemoryContext old;
	bool		ok;

	if (rel->trigdesc != NULL || rel->rd_rel->relrowsecurity || !only_id_check(st, rel) ||
		(desc->constr != NULL && desc->constr->has_generated_stored))
		return false;
	/* (statement triggers and row security of the parent stay there) */
	if (prel != NULL && (prel->trigdesc != NULL || prel->rd_rel->relrowsecurity))
		return false;

	reset_state(st);
	old = MemoryContextSwitchTo(st->cxt);
	ok = resolve_columns(st, rel);
	if (ok)
	{
		st->estate = CreateExecutorState();
		st->slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(desc), &TTSOpsVirtual);
		if (!st->archive)
		{
			st->scan_slot = MakeSingleTupleTableSlot(st->slot->tts_tupleDescriptor,
													 table_slot_callbacks(rel));
			st->lock_slot = MakeSingleTupleTableSlot(st->slot->tts_tupleDescriptor,
													 table_slot_callbacks(rel));
		}
		ok = resolve_indexes(st, rel);
	}
	MemoryContextSwitchTo(old);
	st->valid = ok;
	return ok;
}

/* A new state for q's hot table, or for the current segment of its archive. */
static QueueDirectState *
new_state(QueueInfo *q, bool archive)
{
	char		tname[NAMEDATALEN + 4];
	Oid			nsp = get_namespace_oid("queue", false);
	MemoryContext old = MemoryContextSwitchTo(CacheMemoryContext);
	QueueDirectState *st = palloc0(sizeof(QueueDirectState));

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
	st->qno = q->qno;
	st->cxt = AllocSetContextCreate(CacheMemoryContext, "queue direct", ALLOCSET_SMALL_SIZES);
	all_states = lappend(all_states, st);
	MemoryContextSwitchTo(old);
	return st;
}

/*
 * Open q's hot table (or the current segment of its archive), making or
 * rebuilding its state (q->direct, q->archive_direct).  NULL if the table
 * needs the executor, or if the user lacks a privilege of mode on the
 * whole table (then the executor checks column privileges, or fails).  An
 * archive segment is written as the executor would write it through the
 * archive, which is what privileges are checked on and locked first.  In a
 * read-only transaction the executor refuses the write, as it should.
 */
Relation
QueueDirectOpen(QueueInfo *q, bool archive, AclMode mode)
{
	QueueDirectState **stp = archive ? &q->archive_direct : &q->direct;
	QueueDirectState *st;
	Relation	rel;
	Oid			aclid;
	bool		ok;

	if (XactReadOnly)
		return NULL;
	if (*stp == NULL)
		*stp = new_state(q, archive);
	st = *stp;
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
	if (st->valid)
		return rel;
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
	if (ok)
		return rel;
	table_close(rel, RowExclusiveLock);
	return NULL;
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

	ds->rel = QueueDirectOpen(q, false, ACL_SELECT | (cmd == CMD_UPDATE ? ACL_UPDATE : ACL_DELETE));
	if (ds->rel == NULL)
		return false;
	ds->st = q->direct;
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
QueueDirectIndexEntries(QueueDirectState *st, Relation rel, TupleTableSlot **slots, int n,
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
