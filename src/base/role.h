/*-------------------------------------------------------------------------
 *
 * role.h
 *	  Running code as another role.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_BASE_ROLE_H
#define QUEUE_BASE_ROLE_H

#include <signal.h>

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
extern volatile sig_atomic_t QueueInOwnerCode;
extern void QueueOwnerTimeoutBegin(void);
extern void QueueOwnerTimeoutCheck(const char *what);
extern ErrorData *QueueRunInSubxact(void (*fn) (void *arg), void *arg);
extern void QueueReadInSubxact(void (*fn) (void *arg), void *arg);

#endif							/* QUEUE_BASE_ROLE_H */
