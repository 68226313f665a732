/*-------------------------------------------------------------------------
 *
 * notify.c
 *	  The NOTIFYs a database worker sends for committed producers: one per
 *	  queue marked in shared memory (shmem/wakeups.c says who marks them).
 *
 * Each pass costs the worker a transaction and signals every listening
 * backend of the database, which wakes and hands the notification to its
 * client.  Up to NOTIFY_BURST passes go out at once, so that commits a
 * moment apart each reach a waiting consumer without delay (a fixed
 * spacing made a third of the jobs of a random stream of 200 a second
 * wait for it); past that, one pass per NOTIFY_INTERVAL_MS covers every
 * commit in between.  A queue whose consumers are all busy is notified at
 * most once per queue.notify_busy_interval (QueueCollectNotifications).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/hsearch.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "base/settings.h"
#include "shmem/databases.h"
#include "shmem/queuestate.h"
#include "worker/notify.h"
#include "worker/pass.h"

#define NOTIFY_INTERVAL_MS		2
#define NOTIFY_BURST			8

/*
 * Channel of each queue, by queue number.  A queue keeps its name and number
 * for life, so entries never go stale; a dropped queue's entry is harmless.
 */
typedef struct Channel
{
	int32		qno;
	char		name[NAMEDATALEN];
} Channel;

static HTAB *channels = NULL;
static uint64 channels_learnt = 0;	/* WorkerConfigChanges() when learnt */

/* What is owed: notifications asked for, and when one held back falls due. */
static bool notify_owed = false;
static bool notify_all_owed = false;
static TimestampTz notify_retry_at = 0;
static List *notify_kept = NIL;	/* queues whose marks were kept (QueueCollectNotifications) */
static double notify_tokens = NOTIFY_BURST;
static TimestampTz tokens_at = 0;

/* Are the channels of all of qnos known? */
static bool
channels_known(List *qnos)
{
	ListCell   *lc;

	if (channels_learnt != WorkerConfigChanges())
		return false;
	foreach(lc, qnos)
		if (hash_search(channels, &lfirst_int(lc), HASH_FIND, NULL) == NULL)
			return false;
	return true;
}

/* Learn the channel of every queue; in a pass. */
static void
learn_channels(void)
{
	HASH_SEQ_STATUS status;
	Channel    *old;
	uint64		changes = WorkerConfigChanges();
	int			ret;

	hash_seq_init(&status, channels);
	while ((old = hash_seq_search(&status)) != NULL)
		hash_search(channels, &old->qno, HASH_REMOVE, NULL);
	WorkerLearnConfig();
	ret = SPI_execute("SELECT qno, 'queue_' || name FROM queue.queue_config", true, 0);
	if (ret != SPI_OK_SELECT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("queue worker could not list the queues' channels"),
				 errdetail("The statement returned %s.", SPI_result_code_string(ret)),
				 errhint("A rule on queue.queue_config rewrote the statement; drop it.")));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int32		qno = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		Channel    *c = hash_search(channels, &qno, HASH_ENTER, NULL);

		strlcpy(c->name, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2), NAMEDATALEN);
	}
	channels_learnt = changes;
}

/*
 * NOTIFY the listeners of every queue marked in shared memory (or of all
 * queues).  With the channels known this is a bare transaction that queues
 * the notifications: no snapshot, no catalog access, no SPI.  Returns
 * false if the extension is gone; *sent says whether it notified.
 */
static bool
send_notifications(bool all, TimestampTz now_ts, bool *sent, TimestampTz *retry_at)
{
	List	   *qnos = QueueCollectNotifications(MyDatabaseId, now_ts,
												 queue_notify_busy_interval * INT64CONST(1000),
												 &notify_kept, retry_at);
	ListCell   *lc;

	*sent = qnos != NIL || all;
	if (!*sent)
		return true;
	if (channels == NULL)
	{
		HASHCTL		info;

		info.keysize = sizeof(int32);
		info.entrysize = sizeof(Channel);
		channels = hash_create("queue channels", 64, &info, HASH_ELEM | HASH_BLOBS);
	}
	/* (starting the transaction runs the relcache callback if need be) */
	WorkerPassStart("queue: notify");
	if (all || !channels_known(qnos))
	{
		if (!WorkerPassOpen())
			return false;
		learn_channels();
		SPI_finish();
		PopActiveSnapshot();
	}
	if (all)
	{
		HASH_SEQ_STATUS status;
		Channel    *c;

		hash_seq_init(&status, channels);
		while ((c = hash_seq_search(&status)) != NULL)
			Async_Notify(c->name, NULL);
	}
	foreach(lc, qnos)
	{
		Channel    *c = hash_search(channels, &lfirst_int(lc), HASH_FIND, NULL);

		/* unknown: a queue created and dropped since it was marked */
		if (!all && c != NULL)
			Async_Notify(c->name, NULL);
	}
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
	return true;
}

/* The worker was asked (QUEUE_DB_* requests) for notifications. */
void
WorkerNotifyAsked(int requests, TimestampTz now_ts)
{
	notify_owed |= (requests & QUEUE_DB_NOTIFY) != 0;
	notify_all_owed |= (requests & QUEUE_DB_NOTIFY_ALL) != 0;
	if (notify_retry_at != 0 && now_ts >= notify_retry_at)
	{
		notify_owed = true;
		notify_retry_at = 0;
	}
}

/* The configuration was reloaded: marks held back may be due under a new notify_busy_interval. */
void
WorkerNotifyReloaded(void)
{
	notify_owed = true;
}

/*
 * Send what is owed, as far as the rate allows; false if the extension is
 * gone.
 */
bool
WorkerNotify(TimestampTz now_ts)
{
	bool		sent;
	TimestampTz retry_at;

	notify_tokens = Min(NOTIFY_BURST, notify_tokens + (double) (now_ts - tokens_at) /
						(NOTIFY_INTERVAL_MS * 1000.0));
	tokens_at = now_ts;
	if ((!notify_owed && !notify_all_owed) || notify_tokens < 1)
		return true;
	if (!send_notifications(notify_all_owed, now_ts, &sent, &retry_at))
		return false;
	if (sent)
		notify_tokens -= 1;
	/* the collection saw every mark of the database: when the first held back is due */
	notify_retry_at = retry_at;
	notify_owed = notify_all_owed = false;
	return true;
}

/* timeout (ms), or less if a notification owed is due sooner. */
long
WorkerNotifyTimeout(long timeout, TimestampTz now_ts)
{
	if (notify_owed || notify_all_owed)
		timeout = Min(timeout, Max(0, (long) ((1 - notify_tokens) * NOTIFY_INTERVAL_MS) + 1));
	if (notify_retry_at != 0)
		timeout = Min(timeout, Max(0, (long) ((notify_retry_at - now_ts + 999) / 1000)));
	return timeout;
}
