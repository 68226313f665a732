/*-------------------------------------------------------------------------
 *
 * pass.h
 *	  A database worker's passes, and what it must learn again.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_WORKER_PASS_H
#define QUEUE_WORKER_PASS_H

extern void WorkerPassInit(void);
extern void WorkerPassStart(const char *activity);
extern bool WorkerPassOpen(void);
extern bool WorkerPassBegin(const char *activity);
extern void WorkerPassEnd(void);

extern uint64 WorkerConfigChanges(void);
extern void WorkerLearnConfig(void);

#endif							/* QUEUE_WORKER_PASS_H */
