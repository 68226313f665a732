/*-------------------------------------------------------------------------
 *
 * acl.h
 *	  Who may do what to a queue.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_CATALOG_ACL_H
#define QUEUE_CATALOG_ACL_H

#include "utils/acl.h"

#include "catalog/cache.h"

extern void QueueCheckConfigPrivilege(AclMode mode);
extern QueueInfo *QueueWithTable(int32 qno, Oid *relid);
extern void QueueCheckWriter(int32 qno);
extern QueueInfo *QueueCheckTablePrivilege(int32 qno, bool lease_table, AclMode mode);
extern bool QueueTablePrivilege(QueueInfo *q, AclMode mode);
extern void QueueCheckMayClaim(QueueInfo *q);

#endif							/* QUEUE_CATALOG_ACL_H */
