/*-------------------------------------------------------------------------
 *
 * acl.c
 *	  Who may do what to a queue: the privileges queue.grant() gives on a
 *	  queue, and, for the internal functions, privileges on queue.queue_config
 *	  and on the queue's tables.
 *
 * A role may use a queue through the API if it is a superuser, has the
 * privileges of the queue's owner (the owner of its tables), or has the
 * privileges of a role granted the privilege on the queue.  Role
 * membership counts as everywhere in PostgreSQL (has_privs_of_role: a
 * member that inherits, or one that SET ROLE to the role).  The API then
 * works on the tables as their owner (QueueOpen, catalog/spi.c), so roles
 * need, and should have, no rights on the tables themselves.
 *
 * The internal SQL functions that change a queue's shared state, take its
 * locks or read its bookkeeping are executable by everyone, since the
 * extension's SQL calls them as whoever runs it: the queue's owner for the
 * API and the worker, the reader for queue.stats.  Each first checks that
 * the queue exists and that the caller has what its legitimate callers
 * have (write privileges on the table, or read on the queue): whoever has
 * that could upset the queue anyway, and nobody else may.  (A queue
 * unknown here would still get shared memory at commit, which anyone
 * could then fill.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "base/errors.h"
#include "base/role.h"
#include "catalog/acl.h"
#include "catalog/spi.h"

static const char *const privilege_names[] = {"produce", "consume", "read", "manage"};

/* The privilege bit of name ("all": every bit), or 0 if there is none. */
int
QueuePrivilegeFromName(const char *name)
{
	if (strcmp(name, "all") == 0)
		return QUEUE_ALL;
	for (int i = 0; i < (int) lengthof(privilege_names); i++)
		if (strcmp(name, privilege_names[i]) == 0)
			return 1 << i;
	return 0;
}

/* The name of one privilege bit. */
const char *
QueuePrivilegeName(int priv)
{
	for (int i = 0; i < (int) lengthof(privilege_names); i++)
		if (priv == (1 << i))
			return privilege_names[i];
	return "all";
}

/*
 * The owner of queue q's tables; InvalidOid if its table is gone.  Kept,
 * with whether it is a superuser, until a relcache invalidation (of any
 * relation: ALTER TABLE OWNER, or the table dropped, sends one) arrives,
 * for the hot path.  (ALTER ROLE ... NOSUPERUSER sends none: the role's
 * code keeps its settings undone only from the next such invalidation.)
 */
Oid
QueueOwner(QueueInfo *q)
{
	Oid			relid;
	HeapTuple	tup;

	if (q->owner_gen == QueueRelcacheGen())
		return q->owner;
	q->owner = InvalidOid;
	relid = QueueTableRelid(q);
	tup = OidIsValid(relid) ? SearchSysCache1(RELOID, ObjectIdGetDatum(relid)) : NULL;
	if (HeapTupleIsValid(tup))
	{
		q->owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
		ReleaseSysCache(tup);
	}
	q->owner_super = OidIsValid(q->owner) && superuser_arg(q->owner);
	q->owner_gen = QueueRelcacheGen();
	return q->owner;
}

/*
 * Whether the last role asked about is a superuser.  superuser_arg() keeps
 * one answer too, but the privilege checks the owner's work makes ask it
 * about the owner in between, so that a role's every call missed it.
 */
static Oid	super_role = InvalidOid;
static bool super_answer;
static bool super_callback = false;

static void
forget_superuser(Datum arg, int cacheid, uint32 hashvalue)
{
	super_role = InvalidOid;
}

static bool
is_superuser(Oid role)
{
	if (role != super_role)
	{
		if (!super_callback)
		{
			CacheRegisterSyscacheCallback(AUTHOID, forget_superuser, (Datum) 0);
			super_callback = true;
		}
		super_answer = superuser_arg(role);
		super_role = role;
	}
	return super_answer;
}

/*
 * Has role any of the privileges privs on queue q?  The owner is looked up
 * last: in a new session that is a read of pg_class per queue, which made
 * most of queue.stats over 10,000 queues.
 */
static bool
role_may(QueueInfo *q, Oid role, int privs)
{
	Oid			owner;

	if (is_superuser(role))
		return true;
	for (int i = 0; i < q->ngrants; i++)
		if ((q->grants[i].privs & privs) != 0 && has_privs_of_role(role, q->grants[i].role))
			return true;
	owner = QueueOwner(q);
	return OidIsValid(owner) && has_privs_of_role(role, owner);
}

/* Has role any of the privileges privs on queue q? */
bool
QueueMay(QueueInfo *q, Oid role, int privs)
{
	return role_may(q, role, privs);
}

/* Is role q's owner (or a superuser), who may grant, drop and hand it on? */
bool
QueueOwns(QueueInfo *q, Oid role)
{
	Oid			owner = QueueOwner(q);

	return superuser_arg(role) || (OidIsValid(owner) && has_privs_of_role(role, owner));
}

/*
 * The scope's caller may use queue q with privilege priv (or it is an
 * error): the rest of the scope then runs as the queue's owner.  Must be
 * called inside QueueSpiBegin.  For a queue named by a job's id (id not
 * 0), the error names the job, not the queue: a role that may not use
 * the queue must not learn its name.
 */
void
QueueOpen(QueueInfo *q, int priv, int64 id)
{
	Oid			caller = QueueSpiCaller();
	Oid			owner;

	/* installed at 0.3 or before: table privileges decide, as they did */
	if (q->legacy_acl)
		return;
	if (!role_may(q, caller, priv))
	{
		const char *role = GetUserNameFromId(caller, false);

		if (id != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for job " INT64_FORMAT, id),
					 errdetail("Role \"%s\" lacks the %s privilege on the job's queue.",
							   role, QueuePrivilegeName(priv)),
					 errhint("The queue's owner can give it with queue.grant(queue, '%s', '%s').",
							 role, QueuePrivilegeName(priv))));
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for queue \"%s\"", q->name),
				 errdetail("Role \"%s\" lacks the %s privilege on it.", role, QueuePrivilegeName(priv)),
				 errhint("The queue's owner can give it with queue.grant('%s', '%s', '%s').",
						 q->name, role, QueuePrivilegeName(priv))));
	}
	owner = QueueOwner(q);
	if (OidIsValid(owner))
		QueueSpiRunAs(owner, q->owner_super);
}

/*
 * An error unless the user may read queue q (what the internal functions
 * behind queue.stats need).  Installed at 0.3 or before, anyone may, as
 * then.
 */
void
QueueCheckReaderOf(QueueInfo *q)
{
	if (!q->legacy_acl && !QueueMay(q, GetUserId(), QUEUE_READ))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for queue number %d", q->qno),
				 errdetail("Role \"%s\" lacks the read privilege on it.", GetUserNameFromId(GetUserId(), false)),
				 errhint("Read queue.stats, which shows the queues the role may read.")));
}

/* The same for queue number qno, which must exist (or it is an error). */
void
QueueCheckReader(int32 qno)
{
	QueueSpiBegin();
	QueueCheckReaderOf(QueueLookupByQno(qno, false));
	QueueSpiEnd();
}

/*
 * An error unless the user may change queue q's settings (queue.alter
 * runs as the queue's owner; before 0.4 it needed UPDATE on queue_config).
 */
void
QueueCheckAlterer(QueueInfo *q)
{
	if (q->legacy_acl)
		QueueCheckConfigPrivilege(ACL_UPDATE);
	else if (!QueueOwns(q, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of queue \"%s\"", q->name),
				 errhint("Use queue.alter(), with the manage privilege.")));
}

/* An error unless the user has privilege mode on queue.queue_config. */
void
QueueCheckConfigPrivilege(AclMode mode)
{
	Oid			relid = QueueConfigRelid();

	if (pg_class_aclcheck(relid, GetUserId(), mode) != ACLCHECK_OK)
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
	Oid			relid;

	QueueSpiBegin();
	(void) QueueWithTable(qno, &relid);
	QueueSpiEnd();
	if (pg_class_aclcheck(relid, GetUserId(), ACL_INSERT | ACL_UPDATE | ACL_DELETE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for queue number %d", qno),
				 errdetail("Changing a queue's shared state needs INSERT, UPDATE or DELETE on its table."),
				 errhint("Use the queue's functions, with the privileges queue.grant() gives.")));
}

/*
 * Queue qno, if the role has privilege mode on its job table (or, with
 * lease_table, on its lease table); an error otherwise, which names the
 * queue by number only (the caller gave that).  Must be called inside
 * QueueSpiBegin.
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
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for queue number %d", qno),
				 errdetail("It needs privileges on the queue's %s table.", lease_table ? "lease" : "job"),
				 errhint("Use the queue's functions, with the privileges queue.grant() gives.")));
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
 * Run the rest of the scope as the owner of the extension's tables, who
 * installed it (a superuser then).
 */
void
QueueRunAsCatalogOwner(void)
{
	Oid			owner = QueueRelOwner(QueueConfigRelid(), "queue_config");

	QueueSpiRunAs(owner, superuser_arg(owner));
}
