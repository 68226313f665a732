/*-------------------------------------------------------------------------
 *
 * access.c
 *	  Privileges on queues: queue.grant() and queue.revoke(), the checks the
 *	  views and queue_config's row security use, and keeping DROP ROLE and
 *	  DROP OWNED aware of the grants.
 *
 * Grants are rows of queue.queue_grants (dumped by pg_dump with the
 * extension's configuration).  PostgreSQL knows nothing of them, so that
 * DROP ROLE refuses to drop a role that has some, as it does for
 * privileges on tables, each grantee gets a shared dependency on the
 * queue_grants table (deptype 'a', the one of privileges): DROP ROLE then
 * says "privileges for table queue.queue_grants", in whichever database
 * they are.  DROP OWNED BY revokes them in the current database, as it
 * revokes the role's privileges on everything else there (an event
 * trigger, queue._drop_owned()).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "lib/qunique.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "base/errors.h"
#include "base/role.h"
#include "catalog/acl.h"
#include "catalog/spi.h"

/* The privilege names of argument argno ("all": every one), checked. */
static Datum
privilege_names(FunctionCallInfo fcinfo, int argno)
{
	const char *name;
	int			privs;
	Datum		names[4];
	int			n = 0;

	QueueCheckNotNull(PG_ARGISNULL(argno), "privilege",
					  "Pass 'produce', 'consume', 'read', 'manage' or 'all'.");
	name = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	privs = QueuePrivilegeFromName(name);
	if (privs == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown queue privilege \"%s\"", name),
				 errhint("Privileges are 'produce', 'consume', 'read', 'manage' and 'all'.")));
	for (int one = QUEUE_PRODUCE; one <= QUEUE_MANAGE; one <<= 1)
		if ((privs & one) != 0)
			names[n++] = CStringGetTextDatum(QueuePrivilegeName(one));
	return PointerGetDatum(construct_array(names, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * Run sql on queue_grants with arguments (qno, role, privileges) as the
 * owner of the extension's tables, once the caller is found to own queue
 * qname.
 */
static void
change_grants(FunctionCallInfo fcinfo, const char *sql, const char *verb)
{
	Datum		privs = privilege_names(fcinfo, 2);
	Oid			types[3] = {INT4OID, OIDOID, TEXTARRAYOID};
	Datum		args[3];
	QueueInfo  *q;
	QueueAsRole as;
	int			ret;

	QueueCheckNotNull(PG_ARGISNULL(1), "role", "Pass the role to give the privilege to, for example 'billing'.");
	QueueSpiBegin();
	q = QueueLookupByName(PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0));
	if (!QueueOwns(q, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s privileges on queue \"%s\"", verb, q->name),
				 errdetail("Only the queue's owner and superusers may."),
				 errhint("Ask the owner of table queue.q_%s.", q->name)));
	args[0] = Int32GetDatum(q->qno);
	args[1] = PG_GETARG_DATUM(1);
	args[2] = privs;
	QueueAsRoleInScopeBegin(&as, QueueRelOwner(QueueConfigRelid(), "queue_config"));
	ret = SPI_execute_with_args(sql, 3, types, args, NULL, false, 0);
	QueueAsRoleEnd(&as);
	QueueCheckSpi(ret, strncmp(sql, "INSERT", 6) == 0 ? SPI_OK_INSERT : SPI_OK_DELETE, -1,
				  "change its grants", q->name);
	QueueSpiEnd();
}

/* queue.grant(queue, role, privilege) */
PG_FUNCTION_INFO_V1(queue_grant);
Datum
queue_grant(PG_FUNCTION_ARGS)
{
	change_grants(fcinfo,
				  "INSERT INTO queue.queue_grants (qno, grantee, privilege)"
				  " SELECT $1, $2, p FROM pg_catalog.unnest($3) AS p ON CONFLICT DO NOTHING",
				  "grant");
	PG_RETURN_VOID();
}

/* queue.revoke(queue, role, privilege) */
PG_FUNCTION_INFO_V1(queue_revoke);
Datum
queue_revoke(PG_FUNCTION_ARGS)
{
	change_grants(fcinfo,
				  "DELETE FROM queue.queue_grants WHERE qno OPERATOR(pg_catalog.=) $1"
				  " AND grantee::oid OPERATOR(pg_catalog.=) $2 AND privilege OPERATOR(pg_catalog.=) ANY ($3)",
				  "revoke");
	PG_RETURN_VOID();
}

/*
 * queue._may(qno, privilege): whether the user has the privilege on queue
 * qno ('any': any privilege), for the views' filters.  False for a queue
 * that does not exist.
 */
PG_FUNCTION_INFO_V1(queue_may);
Datum
queue_may(PG_FUNCTION_ARGS)
{
	const char *name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	int			privs = strcmp(name, "any") == 0 ? QUEUE_ALL : QueuePrivilegeFromName(name);
	QueueInfo  *q;
	bool		may;

	QueueSpiBegin();
	q = QueueLookupByQno(PG_GETARG_INT32(0), true);
	may = q != NULL && QueueMay(q, GetUserId(), privs);
	QueueSpiEnd();
	PG_RETURN_BOOL(may);
}

/*
 * queue._owns(queue name): whether the user owns the queue (has the
 * privileges of the owner of its table), or is a superuser.  The row
 * security policy of queue_config: it reads no table, as queue_config's
 * own policy must not.
 */
PG_FUNCTION_INFO_V1(queue_owns);
Datum
queue_owns(PG_FUNCTION_ARGS)
{
	char	   *tname = psprintf("q_%s", text_to_cstring(PG_GETARG_TEXT_PP(0)));
	Oid			relid = get_relname_relid(tname, get_namespace_oid("queue", false));
	Oid			user = GetUserId();

	if (superuser_arg(user))
		PG_RETURN_BOOL(true);
	PG_RETURN_BOOL(OidIsValid(relid) && has_privs_of_role(user, QueueRelOwner(relid, tname + 2)));
}

static int
cmp_oid(const void *a, const void *b)
{
	Oid			x = *(const Oid *) a;
	Oid			y = *(const Oid *) b;

	return (x > y) - (x < y);
}

/* The sorted, distinct roles of the first column of SPI's result, copied. */
static int
result_roles(Oid **roles)
{
	int			n = 0;

	*roles = palloc(sizeof(Oid) * Max(SPI_processed, 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		(*roles)[n++] = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
	}
	qsort(*roles, n, sizeof(Oid), cmp_oid);
	return n;
}

/*
 * queue._grants_changed(), the statement trigger on queue_grants: the
 * grantees' shared dependencies on the table become those of its rows
 * (and of its own ACL, which the same entries stand for).
 */
PG_FUNCTION_INFO_V1(queue_grants_changed);
Datum
queue_grants_changed(PG_FUNCTION_ARGS)
{
	Relation	rel;
	Oid			relid;
	Datum		acl_datum;
	Oid		   *old_roles;
	Oid		   *new_roles;
	Oid		   *acl_roles = NULL;
	int			nold;
	int			nnew;
	int			nacl = 0;
	Datum		arg;
	HeapTuple	tup;
	bool		isnull;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("queue._grants_changed() can only be called as a trigger"),
				 errhint("Changes to queue.queue_grants call it.")));
	rel = ((TriggerData *) fcinfo->context)->tg_relation;
	relid = RelationGetRelid(rel);
	arg = ObjectIdGetDatum(relid);

	QueueSpiBegin();
	QueueCheckSpi(SPI_execute_with_args("SELECT refobjid FROM pg_catalog.pg_shdepend"
										" WHERE dbid OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_database"
										"  WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database())"
										" AND classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
										" AND objid OPERATOR(pg_catalog.=) $1 AND objsubid OPERATOR(pg_catalog.=) 0"
										" AND deptype OPERATOR(pg_catalog.=) 'a'",
										1, (Oid[]) {OIDOID}, &arg, NULL, false, 0),
				  SPI_OK_SELECT, -1, "read the grants' dependencies", "");
	nold = result_roles(&old_roles);
	/* (not read-only: the statement's own rows count) */
	QueueCheckSpi(SPI_execute("SELECT DISTINCT grantee::oid FROM queue.queue_grants", false, 0),
				  SPI_OK_SELECT, -1, "read the grants", "");
	nnew = result_roles(&new_roles);

	tup = SearchSysCache1(RELOID, arg);
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table queue.queue_grants was dropped meanwhile"),
				 errhint("Reinstall the extension.")));
	acl_datum = SysCacheGetAttr(RELOID, tup, Anum_pg_class_relacl, &isnull);
	if (!isnull)
		nacl = aclmembers(DatumGetAclP(acl_datum), &acl_roles);
	if (nacl > 0)
	{
		new_roles = repalloc(new_roles, sizeof(Oid) * (nnew + nacl));
		memcpy(new_roles + nnew, acl_roles, sizeof(Oid) * nacl);
		nnew += nacl;
		qsort(new_roles, nnew, sizeof(Oid), cmp_oid);
	}
	nnew = qunique(new_roles, nnew, sizeof(Oid), cmp_oid);
	updateAclDependencies(RelationRelationId, relid, 0, ((Form_pg_class) GETSTRUCT(tup))->relowner,
						  nold, old_roles, nnew, new_roles);
	ReleaseSysCache(tup);
	QueueSpiEnd();
	return PointerGetDatum(NULL);
}

/*
 * queue._drop_owned(), the event trigger before DROP OWNED: the roles'
 * grants on queues go, as their privileges on everything else of the
 * database do.
 */
PG_FUNCTION_INFO_V1(queue_drop_owned);
Datum
queue_drop_owned(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	ListCell   *lc;
	QueueAsRole as;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("queue._drop_owned() can only be called as an event trigger"),
				 errhint("DROP OWNED calls it.")));
	trigdata = (EventTriggerData *) fcinfo->context;
	if (!IsA(trigdata->parsetree, DropOwnedStmt))
		PG_RETURN_VOID();
	QueueSpiBegin();
	QueueAsRoleInScopeBegin(&as, QueueRelOwner(QueueConfigRelid(), "queue_config"));
	foreach(lc, ((DropOwnedStmt *) trigdata->parsetree)->roles)
	{
		Datum		role = ObjectIdGetDatum(get_rolespec_oid(lfirst(lc), false));

		QueueCheckSpi(SPI_execute_with_args("DELETE FROM queue.queue_grants WHERE grantee::oid OPERATOR(pg_catalog.=) $1",
											1, (Oid[]) {OIDOID}, &role, NULL, false, 0),
					  SPI_OK_DELETE, -1, "revoke the role's grants", "");
	}
	QueueAsRoleEnd(&as);
	QueueSpiEnd();
	PG_RETURN_VOID();
}
