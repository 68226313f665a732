/*-------------------------------------------------------------------------
 *
 * locktags.h
 *	  The heavyweight locks the extension takes.
 *
 * They are advisory-style locks (SET_LOCKTAG_ADVISORY) on (database, queue
 * number, key) with a fourth field of their own, so that they never
 * collide with users' advisory locks, which use 1 and 2.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_BASE_LOCKTAGS_H
#define QUEUE_BASE_LOCKTAGS_H

#define QUEUE_LOCKTAG_GROUP		7	/* a bucket of group keys (ops/groups.c) */
#define QUEUE_LOCKTAG_LEASES	8	/* a queue's batch leases (xact/leases.c) */

#endif							/* QUEUE_BASE_LOCKTAGS_H */
