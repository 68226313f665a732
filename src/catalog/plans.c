/*-------------------------------------------------------------------------
 *
 * plans.c
 *	  The saved statements each queue has, kept as data: for each, its SQL,
 *	  the types of its arguments and the columns it returns.
 *
 * A statement's text names the queue's objects with placeholders, filled
 * in for each queue when its plan is first made (plan_text):
 *	 {jobs}		the job table, queue.q_<name>
 *	 {seq}		its sequence, as a literal for nextval()
 *	 {archive}, {slots}, {leases}	the archive, slot and lease tables
 *	 {result}	the statement's result columns (the def's result)
 *	 {carried}	the columns a claimed job carries (base/job.h)
 *	 {carried_args}		$1 .. $14, arrays of those columns
 *	 {archived}	the job columns the archive copies, and {u.archived}
 *				the same from unnest() alias u
 *	 {factor}	JOB_ID_FACTOR (base/jobid.h)
 * A def whose args begin with CARRIED_ARRAYS takes the arrays of the
 * carried columns first, then the args listed.
 *
 * result lists, in order, the names of the columns the statement returns;
 * readers find a column with QueuePlanColumn, and the plan is checked
 * against the list when it is made.
 *
 * Every statement is an index lookup or an ordered index scan whatever its
 * parameters, and is planned once, generically (see QueueGetPlan).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/plancache.h"

#include "base/job.h"
#include "base/jobid.h"
#include "catalog/plans.h"

#define PLAN_MAX_ARGS	16
#define PLAN_MAX_RESULT	16
#define CARRIED_ARRAYS	((Oid) -1)	/* see the header comment */

typedef struct QueuePlanDef
{
	const char *sql;
	Oid			args[PLAN_MAX_ARGS];	/* ends at the first InvalidOid */
	const char *result;			/* NULL: returns no rows */
} QueuePlanDef;

/* What a claim takes: the first ready jobs in claim order nobody holds. */
#define CLAIM_FROM(pick) \
	"id = ANY (ARRAY(SELECT id FROM {jobs} WHERE state = 'ready' AND NOT queue._leased(id) " pick \
	" LIMIT $2 FOR UPDATE SKIP LOCKED)) AND NOT queue._leased(id)"
#define PICK_FRONT	"ORDER BY priority DESC, rank"
#define PICK_AT		"AND priority = $6 AND rank >= $7 ORDER BY rank"
#define PICK_BELOW	"AND priority < $6 ORDER BY priority DESC, rank"

/*
 * Claimed jobs leave the table until commit (xact/held.c), unless the
 * claim is a transaction of its own: then they can only be written back as
 * running, so they are updated in place.  Both return the carried columns
 * up to uncounted; claimed_at is $5.  A ready row may be under a batch
 * lease (xact/leases.c): the scan passes over such rows, and each row is
 * checked again once it is locked, when no claim can be leasing it any
 * more.
 */
#define CLAIM_HOLD(pick) \
	"WITH c AS (DELETE FROM {jobs} WHERE " CLAIM_FROM(pick) " RETURNING {result})" \
	" SELECT * FROM c ORDER BY priority DESC, rank"
#define CLAIM_IN_PLACE(pick) \
	"WITH c AS (UPDATE {jobs} SET state = 'running', attempt = attempt + 1, lease_until = $5 + $1," \
	" claimed_at = $5, owner_pid = $3, owner_start = $4 WHERE " CLAIM_FROM(pick) " RETURNING {result})" \
	" SELECT * FROM c ORDER BY priority DESC, rank"
#define CLAIM_ARGS_FRONT	{INTERVALOID, INT4OID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID}
#define CLAIM_ARGS_AT		{INTERVALOID, INT4OID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID, INT8OID}
#define CLAIM_ARGS_BELOW	{INTERVALOID, INT4OID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID}
#define CLAIM_HOLD_RESULT \
	"id, payload, attempt + 1 AS attempt, group_key, enqueued_at, $5 + $1 AS lease_until, priority," \
	" rank, run_at, dedup_key, last_error, history, uncounted"
#define CLAIM_IN_PLACE_RESULT \
	"id, payload, attempt, group_key, enqueued_at, lease_until, priority, rank, run_at, dedup_key," \
	" last_error, history, uncounted"

static const QueuePlanDef plan_defs[NUM_QUEUE_PLANS] = {
	[PLAN_INSERT] = {
		"INSERT INTO {jobs} (id, rank, run_at, enqueued_at, state, priority, attempt, group_key,"
		" dedup_key, payload) VALUES ($1, $1 / {factor}, $2, now(), $3::queue.job_state, $4, 0, $5, $6, $7)",
		{INT8OID, TIMESTAMPTZOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, JSONBOID},
	},
	[PLAN_INSERT_DEDUP] = {
		"INSERT INTO {jobs} (id, rank, run_at, enqueued_at, state, priority, attempt, group_key,"
		" dedup_key, payload) VALUES ($1, $1 / {factor}, $2, now(), $3::queue.job_state, $4, 0, $5, $6, $7)"
		" ON CONFLICT (dedup_key) WHERE dedup_key IS NOT NULL AND state <> 'dead' DO NOTHING"
		" RETURNING {result}",
		{INT8OID, TIMESTAMPTZOID, TEXTOID, INT4OID, TEXTOID, TEXTOID, JSONBOID},
		"id",
	},
	[PLAN_FIND_DEDUP] = {
		"SELECT {result} FROM {jobs} WHERE dedup_key = $1 AND state <> 'dead'",
		{TEXTOID},
		"id",
	},
	[PLAN_INSERT_BATCH] = {
		"INSERT INTO {jobs} (id, rank, run_at, enqueued_at, state, priority, attempt, group_key, payload)"
		" SELECT u.id, u.id / {factor}, $3, now(), (CASE WHEN u.n = 1 THEN $4 ELSE $7 END)::queue.job_state,"
		" $5, 0, $6, u.p FROM unnest($1, $2) WITH ORDINALITY AS u(id, p, n)",
		{INT8ARRAYOID, JSONBARRAYOID, TIMESTAMPTZOID, TEXTOID, INT4OID, TEXTOID, TEXTOID},
	},

	/*
	 * Up to $4 scheduled jobs due by $1 become ready.  The next due time
	 * counts jobs due after $1 only: one due by then and still scheduled is
	 * ours (our snapshot shows it as it was) or another promotion's in
	 * flight, which makes it ready when it commits and brings the due time
	 * back if it aborts (xact/pending.c).  Only if we stopped at $4 jobs
	 * are more due at once.  Otherwise, if one we did not take is left, it
	 * may instead be locked by something that will not make it ready (a
	 * cancel that rolls back, a user's FOR UPDATE): someone must look again,
	 * at $3 (a naptime on).  NOT IN (SELECT ...) is hashed, where <> ALL
	 * (ARRAY(...)) would compare every due entry with every job we took.
	 * left_due says whether one was left (see promote_due in ops/claim.c);
	 * $2 is the first batch lease to run out.
	 */
	[PLAN_PROMOTE] = {
		"WITH u AS (UPDATE {jobs} SET state = 'ready', rank = nextval({seq})"
		" WHERE id = ANY (ARRAY(SELECT id FROM {jobs} WHERE state = 'scheduled' AND run_at <= $1"
		" ORDER BY run_at LIMIT $4 FOR UPDATE SKIP LOCKED))"
		" RETURNING id, priority, rank),"
		" l AS (SELECT (SELECT run_at FROM {jobs} WHERE state = 'scheduled' AND run_at <= $1"
		" AND id NOT IN (SELECT id FROM u) ORDER BY run_at LIMIT 1) IS NOT NULL AS left_due)"
		" SELECT count(*) AS promoted, max(priority) AS priority, min(rank) AS rank,"
		" CASE WHEN count(*) > 0 THEN least("
		"CASE WHEN count(*) = $4 THEN $1 + interval '1 microsecond' WHEN (SELECT left_due FROM l) THEN $3 END,"
		" (SELECT run_at FROM {jobs} WHERE state = 'scheduled' AND run_at > $1 ORDER BY run_at LIMIT 1),"
		" (SELECT lease_until FROM {jobs} WHERE state = 'running' ORDER BY lease_until LIMIT 1), $2)"
		" END AS next_due,"
		" (SELECT left_due FROM l) AS left_due FROM u",
		{TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID},
		"promoted, priority, rank, next_due, left_due",
	},
	[PLAN_CLAIM_FRONT] = {CLAIM_HOLD(PICK_FRONT), CLAIM_ARGS_FRONT, CLAIM_HOLD_RESULT},
	[PLAN_CLAIM_AT] = {CLAIM_HOLD(PICK_AT), CLAIM_ARGS_AT, CLAIM_HOLD_RESULT},
	[PLAN_CLAIM_BELOW] = {CLAIM_HOLD(PICK_BELOW), CLAIM_ARGS_BELOW, CLAIM_HOLD_RESULT},
	[PLAN_LEASE_FRONT] = {CLAIM_IN_PLACE(PICK_FRONT), CLAIM_ARGS_FRONT, CLAIM_IN_PLACE_RESULT},
	[PLAN_LEASE_AT] = {CLAIM_IN_PLACE(PICK_AT), CLAIM_ARGS_AT, CLAIM_IN_PLACE_RESULT},
	[PLAN_LEASE_BELOW] = {CLAIM_IN_PLACE(PICK_BELOW), CLAIM_ARGS_BELOW, CLAIM_IN_PLACE_RESULT},
	[PLAN_COMPLETE_ARCHIVE] = {
		"DELETE FROM {jobs} WHERE id = ANY ($1) AND state = 'running'"
		" AND ($2::int IS NULL OR attempt = $2) AND $3 IS NOT NULL RETURNING {result}",
		{INT8ARRAYOID, INT4OID, TIMESTAMPTZOID},
		"{carried}",
	},
	[PLAN_COMPLETE_DELETE] = {
		"DELETE FROM {jobs} WHERE id = ANY ($1) AND state = 'running'"
		" AND ($2::int IS NULL OR attempt = $2) AND $3 IS NOT NULL RETURNING {result}",
		{INT8ARRAYOID, INT4OID, TIMESTAMPTZOID},
		"id, group_key",
	},
	[PLAN_LOCK_RUNNING] = {
		"SELECT {result} FROM {jobs} WHERE id = $1 AND state = 'running'"
		" AND ($2::int IS NULL OR attempt = $2) FOR UPDATE",
		{INT8OID, INT4OID},
		"attempt, uncounted",
	},
	[PLAN_FAIL] = {
		"UPDATE {jobs} SET state = $2::queue.job_state, run_at = $3,"
		" rank = CASE WHEN $2 = 'dead' THEN rank ELSE nextval({seq}) END,"
		" lease_until = NULL, owner_pid = NULL, owner_start = NULL, last_error = $4,"
		" history = coalesce(history, '[]') || jsonb_build_object('event', 'failed',"
		" 'at', $5, 'attempt', attempt, 'claimed_at', claimed_at, 'detail', $4)"
		" WHERE id = $1 RETURNING {result}",
		{INT8OID, TEXTOID, TIMESTAMPTZOID, TEXTOID, TIMESTAMPTZOID},
		"priority, rank, group_key",
	},
	[PLAN_RELEASE] = {
		"UPDATE {jobs} SET state = $2::queue.job_state, run_at = $3, rank = nextval({seq}),"
		" uncounted = uncounted + 1, lease_until = NULL, owner_pid = NULL, owner_start = NULL,"
		" history = coalesce(history, '[]') || jsonb_build_object('event', 'released',"
		" 'at', $4, 'attempt', attempt, 'claimed_at', claimed_at)"
		" WHERE id = $1 RETURNING {result}",
		{INT8OID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID},
		"priority, rank",
	},
	[PLAN_EXTEND] = {
		"UPDATE {jobs} SET lease_until = $3 WHERE id = $1 AND state = 'running'"
		" AND ($2::int IS NULL OR attempt = $2) RETURNING {result}",
		{INT8OID, INT4OID, TIMESTAMPTZOID},
		"lease_until",
	},
	[PLAN_STATE] = {
		"SELECT state::text AS state FROM {jobs} WHERE id = $1",
		{INT8OID},
		"state",
	},
	[PLAN_GROUP_BUSY] = {
		"SELECT 1 AS busy FROM {jobs} WHERE group_key = $1 AND state <> 'dead' ORDER BY rank LIMIT 1",
		{TEXTOID},
		"busy",
	},
	/* while fewer than $3 jobs of the group are active */
	[PLAN_GROUP_ADVANCE] = {
		"UPDATE {jobs} SET rank = nextval({seq}),"
		" state = CASE WHEN run_at > $2 THEN 'scheduled' ELSE 'ready' END::queue.job_state"
		" WHERE id = (SELECT id FROM {jobs} WHERE group_key = $1 AND state = 'waiting' ORDER BY rank LIMIT 1)"
		" AND (SELECT count(*) FROM (SELECT 1 FROM {jobs} WHERE group_key = $1"
		" AND group_key IS NOT NULL AND state IN ('ready', 'scheduled', 'running') LIMIT $3) a) < $3"
		" RETURNING {result}",
		{TEXTOID, TIMESTAMPTZOID, INT4OID},
		"priority, rank, run_at",
	},
	[PLAN_GROUP_REQUEUE] = {
		"UPDATE {jobs} SET state = 'waiting', rank = nextval({seq}) WHERE id = $1",
		{INT8OID},
	},
	/* $2 jobs of the group may be active (ready, scheduled or running) */
	[PLAN_GROUP_BUSY_N] = {
		"SELECT EXISTS (SELECT 1 FROM {jobs} WHERE group_key = $1 AND state = 'waiting')"
		" OR (SELECT count(*) FROM (SELECT 1 FROM {jobs} WHERE group_key = $1"
		" AND state IN ('ready', 'scheduled', 'running') LIMIT $2) a) >= $2 AS busy",
		{TEXTOID, INT4OID},
		"busy",
	},
	[PLAN_SLOTS_TAKE] = {
		"SELECT {result} FROM {slots} WHERE job IS NULL AND slot <= $1"
		" AND NOT EXISTS (SELECT 1 FROM {slots} WHERE slot > $1 AND job IS NOT NULL)"
		" ORDER BY slot LIMIT $2 FOR UPDATE SKIP LOCKED",
		{INT4OID, INT4OID},
		"slot",
	},
	[PLAN_SLOTS_ASSIGN] = {
		"UPDATE {slots} s SET job = u.j FROM unnest($1, $2) AS u(n, j) WHERE s.slot = u.n",
		{INT4ARRAYOID, INT8ARRAYOID},
	},
	[PLAN_SLOTS_FREE] = {
		"WITH d AS (DELETE FROM {slots} WHERE job = ANY ($1) AND slot > $2)"
		" UPDATE {slots} SET job = NULL WHERE job = ANY ($1) AND slot <= $2 RETURNING {result}",
		{INT8ARRAYOID, INT4OID},
		"slot",
	},
	[PLAN_SLOTS_MIGRATE] = {
		"WITH o AS (DELETE FROM {slots} WHERE slot = (SELECT max(slot) FROM {slots} WHERE slot > $1)"
		" AND job IS NOT NULL RETURNING job)"
		" UPDATE {slots} s SET job = o.job FROM o WHERE s.slot = $2",
		{INT4OID, INT4OID},
	},
	[PLAN_REINSERT] = {
		"INSERT INTO {jobs} ({carried}, owner_pid, owner_start, state)"
		" SELECT u.*, $15, $16, 'running' FROM unnest({carried_args}) AS u",
		{CARRIED_ARRAYS, INT4OID, TIMESTAMPTZOID},
	},
	[PLAN_ARCHIVE_HELD] = {
		"INSERT INTO {archive} ({archived}, finished_at, state)"
		" SELECT {u.archived}, $15, 'done' FROM unnest({carried_args}) AS u({carried})",
		{CARRIED_ARRAYS, TIMESTAMPTZOID},
	},
	[PLAN_LEASE_INSERT] = {
		"INSERT INTO {leases} (lease, lease_until, claimed_at, owner_pid, owner_start, ids, attempts)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7)",
		{INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID, INT8ARRAYOID, INT4ARRAYOID},
	},
	[PLAN_LEASE_DELETE] = {
		"DELETE FROM {leases} WHERE lease = $1",
		{INT8OID},
	},
	[PLAN_LEASE_RUNNING] = {
		"UPDATE {jobs} SET state = 'running', attempt = attempt + 1, claimed_at = $3,"
		" lease_until = $4, owner_pid = $5, owner_start = $6"
		" WHERE id = $1 AND state = 'ready' AND attempt = $2",
		{INT8OID, INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID},
	},

	/*
	 * The statements of queue._tick_queue (PLAN_PROMOTE is one too), called
	 * through queue._tick_expire and friends: planned on every call as
	 * dynamic SQL, a millisecond each, they were most of the worker's CPU
	 * with many queues.  $1 .. are the SQL functions' arguments after the
	 * queue number.
	 */
	[PLAN_TICK_EXPIRE] = {
		"WITH u AS (UPDATE {jobs} j SET"
		" state = CASE WHEN j.attempt - j.uncounted >= $2 THEN 'dead' ELSE 'ready' END::queue.job_state,"
		" rank = nextval({seq}), run_at = greatest(j.run_at, $3),"
		" lease_until = NULL, owner_pid = NULL, owner_start = NULL,"
		" last_error = CASE WHEN j.lease_until < $3 THEN 'lease expired' ELSE 'consumer disconnected' END,"
		" history = coalesce(j.history, '[]') || jsonb_build_object("
		"'event', CASE WHEN j.lease_until < $3 THEN 'lease expired' ELSE 'consumer disconnected' END,"
		" 'at', $3, 'attempt', j.attempt, 'claimed_at', j.claimed_at)"
		" WHERE j.id = ANY (ARRAY(SELECT s.id FROM {jobs} s WHERE s.state = 'running'"
		" AND (s.lease_until < $3 OR s.owner_pid IS NOT NULL"
		" AND NOT queue._owner_alive(s.owner_pid, s.owner_start))"
		" ORDER BY s.lease_until LIMIT $1 FOR UPDATE SKIP LOCKED))"
		" RETURNING j.id, j.state, j.group_key)"
		" SELECT count(*) AS expired, count(*) FILTER (WHERE state = 'dead') AS n_dead,"
		" array_agg(id) AS ids, array_agg(DISTINCT group_key) FILTER (WHERE"
		" state = 'dead' AND group_key IS NOT NULL) AS dead_groups FROM u",
		{INT4OID, INT4OID, TIMESTAMPTZOID},
		"expired, n_dead, ids, dead_groups",
	},
	/* see queue._tick_queue */
	[PLAN_TICK_NEXT_DUE] = {
		"SELECT least(CASE WHEN $2 >= $3 THEN $1 END,"
		" CASE WHEN (SELECT run_at FROM {jobs} WHERE state = 'scheduled'"
		" AND run_at <= $1 ORDER BY run_at LIMIT 1) IS NOT NULL THEN $1 + $4 END,"
		" (SELECT run_at FROM {jobs} WHERE state = 'scheduled' AND run_at > $1 ORDER BY run_at LIMIT 1),"
		" (SELECT lease_until FROM {jobs} WHERE state = 'running' ORDER BY lease_until LIMIT 1))"
		" AS next_due",
		{TIMESTAMPTZOID, INT8OID, INT4OID, INTERVALOID},
		"next_due",
	},
	[PLAN_TICK_LEASE_DUE] = {
		"SELECT lease_until FROM {leases} ORDER BY lease_until LIMIT 1",
		{0},
		"lease_until",
	},
};

static void append_text(StringInfo buf, QueueInfo *q, const QueuePlanDef *def, const char *text);

/* The queue's tables, by placeholder: the table's name is prefix || name. */
static const struct
{
	const char *key;
	const char *prefix;
}			plan_tables[] = {
	{"jobs", "q_"}, {"archive", "a_"}, {"slots", "s_"}, {"leases", "l_"},
};

/* Append the text of placeholder key (see the header comment) for q. */
static void
append_placeholder(StringInfo buf, QueueInfo *q, const QueuePlanDef *def, const char *key)
{
	char		name[NAMEDATALEN + 16];

	for (int i = 0; i < (int) lengthof(plan_tables); i++)
		if (strcmp(key, plan_tables[i].key) == 0)
		{
			snprintf(name, sizeof(name), "%s%s", plan_tables[i].prefix, q->name);
			appendStringInfoString(buf, quote_qualified_identifier("queue", name));
			return;
		}
	if (strcmp(key, "seq") == 0)
	{
		snprintf(name, sizeof(name), "q_%s$seq", q->name);
		appendStringInfoString(buf, quote_literal_cstr(quote_qualified_identifier("queue", name)));
	}
	else if (strcmp(key, "result") == 0)
		append_text(buf, q, def, def->result);
	else if (strcmp(key, "carried") == 0)
		JobColumnNames(buf, "", 0, JOB_NCARRIED);
	else if (strcmp(key, "carried_args") == 0)
		for (int i = 1; i <= JOB_NCARRIED; i++)
			appendStringInfo(buf, "%s$%d", i > 1 ? ", " : "", i);
	else if (strcmp(key, "archived") == 0)
		JobColumnNames(buf, "", JOB_COL_ARCHIVE, JOB_NCARRIED);
	else if (strcmp(key, "u.archived") == 0)
		JobColumnNames(buf, "u.", JOB_COL_ARCHIVE, JOB_NCARRIED);
	else if (strcmp(key, "factor") == 0)
		appendStringInfoString(buf, JOB_ID_FACTOR_SQL);
	else
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg_internal("unknown placeholder {%s} in a statement of queue \"%s\"", key, q->name)));
}

/* Append text with its placeholders filled in. */
static void
append_text(StringInfo buf, QueueInfo *q, const QueuePlanDef *def, const char *text)
{
	const char *p = text;

	while (*p != '\0')
	{
		const char *open = strchr(p, '{');
		const char *close = open != NULL ? strchr(open, '}') : NULL;
		char		key[32];

		if (close == NULL)
		{
			appendStringInfoString(buf, p);
			break;
		}
		appendBinaryStringInfo(buf, p, open - p);
		if (close - open - 1 >= (int) sizeof(key))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg_internal("placeholder too long in a statement of queue \"%s\"", q->name)));
		memcpy(key, open + 1, close - open - 1);
		key[close - open - 1] = '\0';
		append_placeholder(buf, q, def, key);
		p = close + 1;
	}
}

/* The argument types of a plan; returns how many. */
static int
plan_args(const QueuePlanDef *def, Oid *types)
{
	int			n = 0;

	for (int i = 0; i < PLAN_MAX_ARGS && OidIsValid(def->args[i]); i++)
	{
		if (def->args[i] == CARRIED_ARRAYS)
			for (int c = 0; c < JOB_NCARRIED; c++)
				types[n++] = job_columns[c].arraytype;
		else
			types[n++] = def->args[i];
	}
	return n;
}

/*
 * The names of plan which's result columns, parsed from its def once per
 * backend: the last word of each item of the list.
 */
typedef struct PlanResult
{
	bool		ready;
	int			n;
	char		names[PLAN_MAX_RESULT][NAMEDATALEN];
} PlanResult;

static PlanResult plan_results[NUM_QUEUE_PLANS];

static const PlanResult *
plan_result(QueuePlanId which)
{
	PlanResult *r = &plan_results[which];
	StringInfoData buf;
	char	   *item;
	char	   *save = NULL;
	QueueInfo	dummy = {0};

	if (r->ready || plan_defs[which].result == NULL)
		return r;
	initStringInfo(&buf);
	append_text(&buf, &dummy, &plan_defs[which], plan_defs[which].result);
	for (item = strtok_r(buf.data, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save))
	{
		const char *last = strrchr(item, ' ');

		if (r->n == PLAN_MAX_RESULT)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg_internal("plan %d returns too many columns", (int) which)));
		strlcpy(r->names[r->n++], last != NULL ? last + 1 : item, NAMEDATALEN);
	}
	pfree(buf.data);
	r->ready = true;
	return r;
}

/* The result column name of plan which (1-based), as SPI_getbinval takes it. */
int
QueuePlanColumn(QueuePlanId which, const char *name)
{
	const PlanResult *r = plan_result(which);

	for (int i = 0; i < r->n; i++)
		if (strcmp(r->names[i], name) == 0)
			return i + 1;
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg_internal("plan %d returns no column \"%s\"", (int) which, name)));
	return 0;					/* keep the compiler quiet */
}

/* Column name of row row of the result of plan which, just executed. */
Datum
QueuePlanValue(QueuePlanId which, uint64 row, const char *name, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
						 QueuePlanColumn(which, name), isnull);
}

/*
 * The plan's result must be what its def says: only a rule someone added
 * to the queue's tables can make it otherwise.
 */
static void
check_result(QueuePlanId which, SPIPlanPtr plan, QueueInfo *q)
{
	const PlanResult *r = plan_result(which);
	List	   *sources = SPI_plan_get_plan_sources(plan);
	TupleDesc	desc = sources != NIL ? ((CachedPlanSource *) llast(sources))->resultDesc : NULL;
	int			natts = desc != NULL ? desc->natts : 0;
	bool		same = natts == r->n;

	for (int i = 0; same && i < natts; i++)
		same = strcmp(NameStr(TupleDescAttr(desc, i)->attname), r->names[i]) == 0;
	if (!same)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not prepare a statement for queue \"%s\"", q->name),
				 errdetail("Statement %d returns %d columns where %d were expected.",
						   (int) which, natts, r->n),
				 errhint("A rule on the queue's tables rewrote the statement; drop it.")));
}

/* The saved plan for one statement on queue q; made on first use. */
SPIPlanPtr
QueueGetPlan(QueueInfo *q, QueuePlanId which)
{
	Oid			types[PLAN_MAX_ARGS + JOB_NCARRIED];
	StringInfoData sql;
	SPIPlanPtr	plan;

	if ((int) which < 0 || which >= NUM_QUEUE_PLANS)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg_internal("invalid plan id %d", (int) which)));
	if (q->plans[which] != NULL)
		return q->plans[which];

	/* (clearer than the parser's error) */
	if (!OidIsValid(QueueTableRelid(q)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the table of queue \"%s\", queue.q_%s, does not exist", q->name, q->name),
				 errdetail("It was dropped without queue.drop(), for instance by DROP OWNED ... CASCADE."),
				 errhint("Drop the queue with queue.drop('%s'), and create it again.", q->name)));

	/*
	 * Generic plans: every statement here is an index lookup or an ordered
	 * index scan whatever its parameters, and the plan cache would
	 * otherwise keep replanning some of them (it judges claims by their
	 * LIMIT parameter), which was a third of a claim's time.  That holds
	 * only for what cannot be planned any other way (see queue_planner in
	 * catalog/spi.c): a look for any one matching row (EXISTS, or LIMIT 1
	 * alone) was planned as a sequential scan whenever the statistics said
	 * many rows match, and read the whole table when none did; after
	 * ANALYZE of a queue holding 20,000 scheduled jobs, every promotion did
	 * (sql/plans.sql).  Without sequential scans it may be a bitmap scan,
	 * which reads every match first.  Such looks therefore ask for the
	 * first row in an index's order.
	 */
	initStringInfo(&sql);
	append_text(&sql, q, &plan_defs[which], plan_defs[which].sql);
	plan = SPI_prepare_cursor(sql.data, plan_args(&plan_defs[which], types), types,
							  CURSOR_OPT_GENERIC_PLAN);
	if (plan == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not prepare a statement for queue \"%s\"", q->name),
				 errdetail("SPI returned %s.", SPI_result_code_string(SPI_result)),
				 errhint("The queue's tables were changed by hand; drop and re-create the queue.")));
	check_result(which, plan, q);
	SPI_keepplan(plan);
	q->plans[which] = plan;
	pfree(sql.data);
	return plan;
}
