/*-------------------------------------------------------------------------
 *
 * segment.h
 *	  What each shared memory segment tells the module entry point: its
 *	  size, the LWLock tranches it needs, and how to set it up.
 *
 * module/queue.c requests every segment from one table of these, in the
 * shmem_request_hook, and sets them up in the shmem_startup_hook with
 * AddinShmemInitLock held.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_SHMEM_SEGMENT_H
#define QUEUE_SHMEM_SEGMENT_H

typedef struct QueueShmemSegment
{
	const char *name;
	Size		(*size) (void);
	void		(*request_locks) (void);	/* NULL: none */
	void		(*init) (void);
} QueueShmemSegment;

#endif							/* QUEUE_SHMEM_SEGMENT_H */
