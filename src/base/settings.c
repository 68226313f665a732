/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  Every setting (GUC) of the extension, defined in one place.
 *
 * The settings that size shared memory exist only when the library is
 * preloaded: shared memory is made once, at server start, and a value set
 * later could only mislead.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"
#include "utils/memutils.h"

#include "base/settings.h"

int			queue_max_payload_size = 1024 * 1024;
int			queue_worker_naptime = 1000;
int			queue_upkeep_lock_timeout = 100;
int			queue_upkeep_timeout = 1000;
int			queue_notify_busy_interval = 20;
bool		queue_synchronous_claims = true;
int			queue_max_queues = 1024;
int			queue_max_leased_jobs = 65536;
int			queue_max_databases = 32;

static void
define_session_settings(void)
{
	DefineCustomIntVariable("queue.max_payload_size",
							"Largest payload accepted by queue.enqueue, in bytes.",
							"Larger payloads are refused with an error.",
							&queue_max_payload_size,
							1024 * 1024, 16, MaxAllocSize / 2,
							PGC_SUSET, GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queue.worker_naptime",
							"Longest time the background worker sleeps between upkeep passes.",
							"It also wakes when work comes due or producers commit; this bounds how late an expired lease is noticed.",
							&queue_worker_naptime,
							1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queue.upkeep_lock_timeout",
							"Longest time the background worker waits for a lock that a queue's upkeep needs.",
							"Then it goes on with the other queues and tries that one again after queue.worker_naptime, "
							"so that a session holding locks on one queue's tables cannot stall the upkeep of the others.",
							&queue_upkeep_lock_timeout,
							100, 1, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queue.upkeep_timeout",
							"Longest time one queue's upkeep may take in the background worker.",
							"Code of the queue's owner on its tables (a trigger, say) may make it take longer: the worker then "
							"gives up on that queue, goes on with the others, and tries it again after queue.worker_naptime.",
							&queue_upkeep_timeout,
							1000, 10, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queue.notify_busy_interval",
							"Shortest time between notifications of a queue whose claims have all come back full since the last one.",
							"A consumer waits for a notification only after a claim that came back short, and such a claim has the worker notify at once; "
							"this bounds how late listeners that never claim hear of new jobs. 0 notifies for every commit.",
							&queue_notify_busy_interval,
							20, 0, 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("queue.synchronous_claims",
							 "Whether a transaction that only claimed jobs waits for its commit to reach disk.",
							 "Off saves a consumer a WAL flush per claim; a crash may then undo a claim, uncounted and not in the job's history, and its jobs are ready again.",
							 &queue_synchronous_claims,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
}

static void
define_shared_memory_settings(void)
{
	DefineCustomIntVariable("queue.max_queues",
							"Number of queues whose claim cursor and counters are kept in shared memory.",
							"Queues beyond this number still work, without the cursor.",
							&queue_max_queues,
							1024, 16, 1000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queue.max_leased_jobs",
							"Number of jobs that can be under batch leases at once.",
							"A claim of several jobs in a transaction of its own takes one lease for all of them while there is room; "
							"otherwise it marks each job running. 0 turns batch leases off.",
							&queue_max_leased_jobs,
							65536, 0, 100000000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("queue.max_databases",
							"Number of databases the background worker can serve.",
							NULL,
							&queue_max_databases,
							32, 1, 10000,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
}

/* preloading: the library is loaded at server start (shared memory is made) */
void
QueueSettingsDefine(bool preloading)
{
	define_session_settings();
	if (preloading)
		define_shared_memory_settings();
	MarkGUCPrefixReserved("queue");
}
