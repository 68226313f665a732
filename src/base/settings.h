/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  Every setting (GUC) of the extension.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_BASE_SETTINGS_H
#define QUEUE_BASE_SETTINGS_H

extern int	queue_max_payload_size;
extern int	queue_worker_naptime;
extern int	queue_upkeep_lock_timeout;
extern int	queue_upkeep_timeout;
extern int	queue_notify_busy_interval;
extern bool queue_synchronous_claims;

/* fixed at server start: they size shared memory */
extern int	queue_max_queues;
extern int	queue_max_leased_jobs;
extern int	queue_max_databases;

extern void QueueSettingsDefine(bool preloading);

#endif							/* QUEUE_BASE_SETTINGS_H */
