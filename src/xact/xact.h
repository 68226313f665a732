/*-------------------------------------------------------------------------
 *
 * xact.h
 *	  The one transaction callback of the extension.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_XACT_XACT_H
#define QUEUE_XACT_XACT_H

extern void QueueXactInit(void);
extern void QueueXactRegisterDatabase(Oid dboid);

#endif							/* QUEUE_XACT_XACT_H */
