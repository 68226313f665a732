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

/* Privileges on a queue (queue.grant) */
#define QUEUE_PRODUCE	0x01	/* enqueue */
#define QUEUE_CONSUME	0x02	/* claim, complete, fail, extend, release */
#define QUEUE_READ		0x04	/* its jobs in the views, history, stats */
#define QUEUE_MANAGE	0x08	/* pause, resume, alter, reschedule, cancel, retry, purge */
#define QUEUE_ALL		0x0F

extern int	QueuePrivilegeFromName(const char *name);
extern const char *QueuePrivilegeName(int priv);
extern Oid	QueueOwner(QueueInfo *q);
extern bool QueueMay(QueueInfo *q, Oid role, int privs);
extern bool QueueOwns(QueueInfo *q, Oid role);
extern void QueueOpen(QueueInfo *q, int priv, int64 id);
extern void QueueCheckReader(int32 qno);
extern void QueueCheckReaderOf(QueueInfo *q);
extern void QueueCheckAlterer(QueueInfo *q);
extern void QueueCheckConfigPrivilege(AclMode mode);
extern QueueInfo *QueueWithTable(int32 qno, Oid *relid);
extern void QueueCheckWriter(int32 qno);
extern QueueInfo *QueueCheckTablePrivilege(int32 qno, bool lease_table, AclMode mode);
extern bool QueueTablePrivilege(QueueInfo *q, AclMode mode);
extern void QueueRunAsCatalogOwner(void);

#endif							/* QUEUE_CATALOG_ACL_H */
