/*-------------------------------------------------------------------------
 *
 * listeners.h
 *	  Shared memory segment "queue listeners": which backends LISTEN on
 *	  queue channels.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SHMEM_LISTENERS_H
#define QUEUE_SHMEM_LISTENERS_H

extern Size QueueListenerShmemSize(void);
extern void QueueListenerShmemInit(void);
extern void QueueListenerPublish(Oid dboid);
extern bool QueueAnyListener(Oid dboid);

#endif							/* QUEUE_SHMEM_LISTENERS_H */
