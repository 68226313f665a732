/*-------------------------------------------------------------------------
 *
 * acl.c
 *	  Who may do what to a queue: privileges on queue.queue_config and on
 *	  the queue's tables.
 *
 * The internal SQL functions that change a queue's shared state, take its
 * locks or read its bookkeeping are executable by everyone, since the SQL
 * functions call them as their caller.  Each first checks that the queue
 * exists and that the caller has what its legitimate callers have: whoever
 * has that could upset the queue anyway, and nobody else may.  (A queue
 * unknown here would still get shared memory at commit, which anyone
 * could then fill.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/lsyscache.h"

#include "base/errors.h"
#include "catalog/acl.h"
#include "catalog/spi.h"

/* An error unless the user has privilege mode on queue.queue_config. */
void
QueueCheckConfigPrivilege(AclMode mode)
{
	if (pg_class_aclcheck(QueueConfigRelid(), GetUserId(), mode) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, "queue_config");
}

/*
 * Queue number qno and (*relid) its table, or an error.  Must be called
 * inside QueueSpiBegin.
 */
QueueInfo *
QueueWithTable(int32 qno, Oid *relid)
{
	QueueInfo  *q = QueueLookupByQno(qno, true);

	if (q == NULL || !OidIsValid(*relid = QueueTableRelid(q)))
		QueueErrorNoQueueNumber(qno);
	return q;
}

/*
 * An error unless queue qno exists and the user may write its table: what
 * the internal functions that change its shared state or take its group
 * locks need.
 */
void
QueueCheckWriter(int32 qno)
{
	QueueInfo  *q;
	Oid			relid;

	QueueSpiBegin();
	q = QueueWithTable(qno, &relid);
	QueueSpiEnd();
	if (pg_class_aclcheck(relid, GetUserId(), ACL_INSERT | ACL_UPDATE | ACL_DELETE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for queue \"%s\"", q->name),
				 errdetail("Changing the queue's shared state needs INSERT, UPDATE or DELETE on table queue.q_%s.",
						   q->name),
				 errhint("Use the queue's functions; ask its owner for privileges on its tables.")));
}

/*
 * Queue qno, if the role has privilege mode on its job table (or, with
 * lease_table, on its lease table); an error otherwise.  Must be called
 * inside QueueSpiBegin.
 */
QueueInfo *
QueueCheckTablePrivilege(int32 qno, bool lease_table, AclMode mode)
{
	QueueInfo  *q = QueueLookupByQno(qno, true);
	Oid			relid = InvalidOid;

	if (q != NULL)
		relid = lease_table ? QueueLeaseTableRelid(q) : QueueTableRelid(q);
	if (!OidIsValid(relid))
		QueueErrorNoQueueNumber(qno);
	if (pg_class_aclcheck(relid, GetUserId(), mode) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(relid));
	return q;
}

/*
 * Does the user have any privilege of mode on queue q's table?  (True for
 * a table that is gone: what uses it then fails on its own.)
 */
bool
QueueTablePrivilege(QueueInfo *q, AclMode mode)
{
	Oid			relid = QueueTableRelid(q);

	return !OidIsValid(relid) || pg_class_aclcheck(relid, GetUserId(), mode) == ACLCHECK_OK;
}

/*
 * A claim of a paused queue reads no table, so nothing else would refuse
 * a role that may not claim from it: it would get "nothing to do" (or
 * sleep in claim(wait =>)) where it should get an error.
 */
void
QueueCheckMayClaim(QueueInfo *q)
{
	if (!QueueTablePrivilege(q, ACL_SELECT) || !QueueTablePrivilege(q, ACL_UPDATE | ACL_DELETE))
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, psprintf("q_%s", q->name));
}
