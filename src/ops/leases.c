/*-------------------------------------------------------------------------
 *
 * leases.c
 *	  The SQL functions that batch leases (xact/leases.c) give the
 *	  management and upkeep functions of the extension script.
 *
 * They are executable by everyone, since the SQL functions call them as
 * their caller: each needs what its legitimate callers have, and what
 * would let the role do the same harm anyway (catalog/acl.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lockdefs.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "base/errors.h"
#include "base/jobid.h"
#include "base/role.h"
#include "catalog/acl.h"
#include "catalog/spi.h"
#include "shmem/leasemap.h"
#include "xact/leaseload.h"
#include "xact/leases.h"

/*
 * queue._leased(id): whether the job is under a batch lease, for the SQL
 * that acts on ready rows.  Its caller holds the job's row lock (or the
 * queue's leases, _hold_leases), so no claim is leasing the job right
 * now.  Needs SELECT on the job's table, checked once per transaction and
 * queue: it runs for every ready row a purge or a claim through SPI sees.
 */
PG_FUNCTION_INFO_V1(queue_leased);
Datum
queue_leased(PG_FUNCTION_ARGS)
{
	static LocalTransactionId checked_lxid = InvalidLocalTransactionId;
	static int32 checked_qno = 0;
	static Oid	checked_user = InvalidOid;
	int64		id = PG_GETARG_INT64(0);
	int32		qno = JobIdQueue(id);
	QueueInfo  *q;
	bool		leased = false;

	if (!LeaseMapActive() || id <= 0)
		PG_RETURN_BOOL(false);
	QueueSpiBegin();
	if (checked_lxid != MyProc->lxid || checked_qno != qno || checked_user != GetUserId())
	{
		q = QueueCheckTablePrivilege(qno, false, ACL_SELECT);
		checked_lxid = MyProc->lxid;
		checked_qno = qno;
		checked_user = GetUserId();
	}
	else
		q = QueueLookupById(id, false);
	leased = QueueLeaseIsLeased(q, id);
	QueueSpiEnd();
	PG_RETURN_BOOL(leased);
}

/*
 * queue._lease_claimed_at(id, attempt): when the batch lease a job whose
 * row has that attempt is under was taken, or NULL; for queue.history(),
 * read as the lease table's owner, as xact/leases.c writes it.  Needs SELECT on
 * the job's table.
 */
PG_FUNCTION_INFO_V1(queue_lease_claimed_at);
Datum
queue_lease_claimed_at(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	QueueInfo  *q;
	Oid			relid;
	bool		isnull = true;
	Datum		at = (Datum) 0;

	QueueSpiBegin();
	q = QueueCheckTablePrivilege(JobIdQueue(id), false, ACL_SELECT);
	relid = QueueLeaseTableRelid(q);
	if (OidIsValid(relid))
	{
		Datum		args[2] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)};
		Oid			argtypes[2] = {INT8OID, INT4OID};
		QueueAsRole as;
		int			ret;

		QueueAsRoleInScopeBegin(&as, QueueRelOwner(relid, q->name));
		ret = SPI_execute_with_args(psprintf("SELECT l.claimed_at FROM %s l, unnest(l.ids, l.attempts) u(id, attempt)"
											 " WHERE u.id = $1 AND u.attempt = $2",
											 quote_qualified_identifier("queue", get_rel_name(relid))),
									2, argtypes, args, NULL, true, 1);
		QueueAsRoleEnd(&as);
		QueueCheckSpi(ret, SPI_OK_SELECT, -1, "read the leases", q->name);
		if (SPI_processed == 1)
			at = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	}
	QueueSpiEnd();
	if (isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(at);
}

/*
 * queue._hold_leases(qno): until commit, no batch lease of the queue
 * starts or is loaded, and the batch claims in flight are over.  Needs
 * DELETE on the job table (queue.purge, which holds them, deletes jobs).
 */
PG_FUNCTION_INFO_V1(queue_hold_leases);
Datum
queue_hold_leases(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);

	QueueSpiBegin();
	(void) QueueCheckTablePrivilege(qno, false, ACL_DELETE);
	QueueSpiEnd();
	(void) QueueLeasesLock(qno, ExclusiveLock, true);
	PG_RETURN_VOID();
}

/*
 * queue._share_leases(qno): the worker ends leases only where nothing
 * holds them still, and does not wait for that.  Needs DELETE on the
 * lease table.
 */
PG_FUNCTION_INFO_V1(queue_share_leases);
Datum
queue_share_leases(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);

	QueueSpiBegin();
	(void) QueueCheckTablePrivilege(qno, true, ACL_DELETE);
	QueueSpiEnd();
	PG_RETURN_BOOL(QueueLeasesLock(qno, ShareLock, false));
}

/*
 * queue._lease_dropped(qno, lease, ids): this transaction took the jobs
 * ids off the lease (deleting its row, or taking them off it) and wrote
 * them: their entries go at commit, and the lease's if its row is gone.
 * Needs DELETE on the lease table, and the row must no longer list them:
 * nothing else may take jobs out of a lease.
 */
PG_FUNCTION_INFO_V1(queue_lease_dropped);
Datum
queue_lease_dropped(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);
	int64		lease = PG_GETARG_INT64(1);
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(2);
	Datum	   *ids;
	bool	   *nulls;
	int			n;
	QueueInfo  *q;
	Datum		arg = Int64GetDatum(lease);
	int64	   *jobs;
	int			m = 0;
	Oid			argtypes[2] = {INT8OID, INT8ARRAYOID};
	Datum		args[2];
	bool		gone;
	bool		isnull;

	QueueSpiBegin();
	q = QueueCheckTablePrivilege(qno, true, ACL_DELETE);
	if (JobIdQueue(lease) != qno)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease " INT64_FORMAT " is not one of queue \"%s\"", lease, q->name),
				 errhint("queue._lease_dropped() is for the queue's upkeep.")));
	args[0] = arg;
	args[1] = PointerGetDatum(arr);
	QueueCheckSpi(SPI_execute_with_args(psprintf("SELECT ids && $2 FROM %s WHERE lease = $1",
												   quote_qualified_identifier("queue",
																			  get_rel_name(QueueLeaseTableRelid(q)))),
										  2, argtypes, args, NULL, false, 1),
					SPI_OK_SELECT, -1, "read the leases", q->name);
	gone = SPI_processed == 0;
	if (!gone && DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("lease " INT64_FORMAT " of queue \"%s\" still lists the jobs", lease, q->name),
				 errhint("Take them off the lease's row first; queue._lease_dropped() is for the queue's upkeep.")));
	QueueSpiEnd();
	deconstruct_array(arr, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE, &ids, &nulls, &n);
	jobs = palloc(sizeof(int64) * Max(n, 1));
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			jobs[m++] = DatumGetInt64(ids[i]);
	QueueLeasesDropped(qno, lease, jobs, m, gone);
	PG_RETURN_VOID();
}

/*
 * queue._take_leases(qno): every batch lease of the queue ends, for
 * queue._settle_leases, which writes their jobs as running rows.  The
 * jobs' rows are locked first (as the caller, in id order), then the
 * lease rows deleted (as the lease table's owner) and returned; their
 * entries go at commit.  No batch lease of the queue starts until the
 * transaction ends.  Needs UPDATE on the job table.
 */
PG_FUNCTION_INFO_V1(queue_take_leases);
Datum
queue_take_leases(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int32		qno = PG_GETARG_INT32(0);
	QueueInfo  *q;
	Oid			relid;
	const char *l;
	QueueAsRole as;
	Datum		ids = (Datum) 0;
	bool		isnull = true;
	int			ret;

	InitMaterializedSRF(fcinfo, 0);
	QueueSpiBegin();
	q = QueueCheckTablePrivilege(qno, false, ACL_UPDATE);
	/* what queue.alter needs: a consumer may not end the leases of others */
	QueueCheckAlterer(q);
	relid = QueueLeaseTableRelid(q);
	if (!OidIsValid(relid))
	{
		QueueSpiEnd();
		return (Datum) 0;
	}
	(void) QueueLeasesLock(qno, ExclusiveLock, true);
	l = quote_qualified_identifier("queue", get_rel_name(relid));

	/*
	 * With snapshots taken after the lock, also in REPEATABLE READ: the
	 * leases of claims that committed meanwhile are ended too.
	 */
	QueueAsRoleInScopeBegin(&as, QueueRelOwner(relid, q->name));
	ret = QueueExecuteSqlLatest(psprintf("SELECT array_agg(u.id) FROM %s, unnest(ids) u(id)", l), NULL, true, 1);
	QueueAsRoleEnd(&as);
	QueueCheckSpi(ret, SPI_OK_SELECT, 1, "read the leases", q->name);
	ids = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		QueueCheckSpi(QueueExecuteSqlLatest(psprintf("SELECT id FROM %s WHERE id = ANY ($1) ORDER BY id FOR UPDATE",
												quote_qualified_identifier("queue", psprintf("q_%s", q->name))),
									   &ids, false, 0),
						SPI_OK_SELECT, -1, "lock leased jobs", q->name);
	}

	QueueAsRoleInScopeBegin(&as, QueueRelOwner(relid, q->name));
	ret = QueueExecuteSqlLatest(psprintf("DELETE FROM %s RETURNING lease, ids, attempts, claimed_at, lease_until,"
								  " owner_pid, owner_start", l), NULL, false, 0);
	QueueAsRoleEnd(&as);
	QueueCheckSpi(ret, SPI_OK_DELETE_RETURNING, -1, "end the leases", q->name);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		values[7];
		bool		nulls[7];
		Datum	   *jobs;
		int64	   *job_ids;
		int			n;

		heap_deform_tuple(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		deconstruct_array(DatumGetArrayTypeP(values[1]), INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE,
						  &jobs, NULL, &n);
		job_ids = palloc(sizeof(int64) * Max(n, 1));
		for (int j = 0; j < n; j++)
			job_ids[j] = DatumGetInt64(jobs[j]);
		QueueLeasesDropped(qno, DatumGetInt64(values[0]), job_ids, n, true);
	}
	QueueSpiEnd();
	return (Datum) 0;
}

/*
 * queue._ended_leases(qno): the leases of the queue all of whose jobs
 * finished, but whose rows stay (see xact/leases.c): for the worker to
 * delete.
 * Needs DELETE on the lease table.
 */
PG_FUNCTION_INFO_V1(queue_ended_leases);
Datum
queue_ended_leases(PG_FUNCTION_ARGS)
{
	int32		qno = PG_GETARG_INT32(0);
	int64	   *ended;
	int			n;
	Datum	   *leases;

	QueueSpiBegin();
	(void) QueueCheckTablePrivilege(qno, true, ACL_DELETE);
	QueueSpiEnd();
	n = LeaseMapEnded(qno, &ended);
	leases = palloc(sizeof(Datum) * Max(n, 1));
	for (int i = 0; i < n; i++)
		leases[i] = Int64GetDatum(ended[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(leases, n, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE));
}
