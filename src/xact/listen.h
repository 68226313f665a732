/*-------------------------------------------------------------------------
 *
 * listen.h
 *	  Whether this backend LISTENs on a queue channel.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_XACT_LISTEN_H
#define QUEUE_XACT_LISTEN_H

#include "nodes/nodes.h"

extern void QueueListenUtility(Node *parsetree);

/* steps of the end of a (sub)transaction, called by xact/xact.c */
extern void ListenAtEnd(bool commit);
extern void ListenAtSubEnd(int nest, bool commit);

#endif							/* QUEUE_XACT_LISTEN_H */
