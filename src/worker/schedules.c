/*-------------------------------------------------------------------------
 *
 * schedules.c
 *	  The worker's firing of schedules' ticks (ops/fire.c), a transaction
 *	  per SCHEDULES_PER_PASS due schedules.
 *
 * The worker commits its other work asynchronously; these transactions
 * wait for their local flush, so that a tick's job that a consumer may
 * have seen (and acted on, with a claim that did not wait for its own
 * flush) does not vanish in a crash, to be fired again.  They do not wait
 * for synchronous standbys: a consumer's commit that does waits for the
 * WAL before it, the tick's included.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "postmaster/interrupt.h"
#include "utils/guc.h"

#include "ops/schedule.h"
#include "worker/pass.h"
#include "worker/schedules.h"

/*
 * Fire the due ticks; *next is when the next schedule falls due (0 if
 * none does).  False if the extension is gone.
 */
bool
WorkerFireSchedules(TimestampTz *next)
{
	bool		more;
	int64		jobs = 0;

	do
	{
		if (!WorkerPassBegin("queue: schedules"))
			return false;
		(void) set_config_option("synchronous_commit", "local", PGC_SUSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
		more = QueueFireSchedules(SCHEDULES_PER_PASS, true, &jobs, next);
		WorkerPassEnd();
	} while (more && !ShutdownRequestPending);
	return true;
}
