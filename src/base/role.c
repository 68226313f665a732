/*-------------------------------------------------------------------------
 *
 * role.c
 *	  Running code as another role: the owner of a queue's tables, for its
 *	  upkeep and bookkeeping.
 *
 * Code of one role must never see, or leave behind, the settings or rights
 * of another.  So the switch is a restricted operation with a safe
 * search_path, and its end undoes every setting changed meanwhile (by the
 * role's code, a trigger say), as VACUUM does around index expressions.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/syscache.h"

#include "base/role.h"

void
QueueAsRoleBegin(QueueAsRole *as, Oid role)
{
	GetUserIdAndSecContext(&as->save_userid, &as->save_sec);
	SetUserIdAndSecContext(role, as->save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	as->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

void
QueueAsRoleEnd(QueueAsRole *as)
{
	AtEOXact_GUC(false, as->save_nestlevel);
	SetUserIdAndSecContext(as->save_userid, as->save_sec);
}

/* The owner of relation relid, a table of queue qname. */
Oid
QueueRelOwner(Oid relid, const char *qname)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("a table of queue \"%s\" was dropped meanwhile", qname),
				 errhint("Try again; if the queue was dropped, it is gone.")));
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}
