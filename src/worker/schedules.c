/*-------------------------------------------------------------------------
 *
 * schedules.c
 *	  The worker's firing of schedules' ticks (ops/fire.c), a transaction
 *	  per SCHEDULES_PER_PASS due schedules.
 *
 * The worker commits its other work asynchronously; these transactions
 * commit synchronously (and wait for synchronous standbys, if there are
 * any), so that a tick's job that a consumer may have seen does not
 * vanish in a crash or a failover, to be fired again.
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
		(void) set_config_option("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE,
								 GUC_ACTION_LOCAL, true, 0, false);
		more = QueueFireSchedules(SCHEDULES_PER_PASS, true, &jobs, next);
		WorkerPassEnd();
	} while (more && !ShutdownRequestPending);
	return true;
}
