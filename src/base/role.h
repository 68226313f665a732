/*-------------------------------------------------------------------------
 *
 * role.h
 *	  Running code as another role.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_BASE_ROLE_H
#define QUEUE_BASE_ROLE_H

typedef struct QueueAsRole
{
	Oid			save_userid;
	int			save_sec;
	int			save_nestlevel; /* -1: no settings to undo */
} QueueAsRole;

extern void QueueAsRoleBegin(QueueAsRole *as, Oid role);
extern void QueueAsRoleInScopeBegin(QueueAsRole *as, Oid role);
extern void QueueAsRoleEnd(QueueAsRole *as);
extern Oid	QueueRelOwner(Oid relid, const char *qname);
#include <signal.h>

extern volatile sig_atomic_t QueueInOwnerCode;
extern void QueueOwnerTimeoutBegin(void);
extern bool QueueOwnerTimeoutEnd(void);

#endif							/* QUEUE_BASE_ROLE_H */
