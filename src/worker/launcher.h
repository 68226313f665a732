/*-------------------------------------------------------------------------
 *
 * launcher.h
 *	  The launcher of the database workers.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_WORKER_LAUNCHER_H
#define QUEUE_WORKER_LAUNCHER_H

extern void QueueWorkerRegister(void);

#endif							/* QUEUE_WORKER_LAUNCHER_H */
