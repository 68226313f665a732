/*-------------------------------------------------------------------------
 *
 * listen.c
 *	  Whether this backend LISTENs on a queue channel, as its transactions
 *	  commit LISTEN and UNLISTEN: what it publishes in shared memory
 *	  (shmem/listeners.c), where producers look before they ask the worker
 *	  for a NOTIFY.
 *
 * No wakeup may be lost.  A LISTEN publishes at once, before it takes
 * effect at commit, and before the consumer's next claim takes its
 * snapshot; a producer looks after its commit became visible.  So a
 * producer that sees no listener committed before the consumer's claim,
 * which therefore finds the job.  UNLISTEN and DISCARD ALL only clear the
 * slot when their transaction commits, replayed in order against the
 * channels already committed; an abort keeps what was committed.  Erring
 * towards "listening" costs only a NOTIFY nobody reads.
 *
 * LISTEN on a queue's channel needs the consume or the read privilege on
 * the queue: a notification carries nothing, but its timing tells when
 * the queue's jobs become claimable.  (A LISTEN that was allowed stays
 * after a revoke, until the session ends or UNLISTENs.)
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "storage/ipc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "catalog/acl.h"
#include "catalog/spi.h"
#include "shmem/listeners.h"
#include "xact/listen.h"

#define CHANNEL_PREFIX	"queue_"

/* Queue channels this backend listens on, as of its last commit. */
static List *committed = NIL;

/* LISTEN/UNLISTEN of the open transaction, in order. */
typedef struct ListenOp
{
	bool		listen;
	char	   *channel;		/* NULL: UNLISTEN * */
	int			nest;			/* subtransaction level that did it */
} ListenOp;

static List *pending = NIL;
static bool published_in_xact = false;	/* by a LISTEN of this transaction */
static bool exit_registered = false;

static void
unpublish_at_exit(int code, Datum arg)
{
	QueueListenerPublish(InvalidOid);
}

static List *
apply(List *channels, ListenOp *op)
{
	ListCell   *lc;

	if (op->channel == NULL)
	{
		list_free_deep(channels);
		return NIL;
	}
	foreach(lc, channels)
	{
		if (strcmp(lfirst(lc), op->channel) == 0)
		{
			if (op->listen)
				return channels;
			pfree(lfirst(lc));
			return foreach_delete_current(channels, lc);
		}
	}
	if (op->listen)
		channels = lappend(channels, MemoryContextStrdup(TopMemoryContext, op->channel));
	return channels;
}

static void
clear_pending(void)
{
	ListCell   *lc;

	foreach(lc, pending)
	{
		ListenOp   *op = lfirst(lc);

		if (op->channel)
			pfree(op->channel);
		pfree(op);
	}
	list_free(pending);
	pending = NIL;
}

/* The transaction ended: what it committed takes effect. */
void
ListenAtEnd(bool commit)
{
	/* (a LISTEN in a rolled-back savepoint left published_in_xact only) */
	if (pending == NIL && !published_in_xact)
		return;
	if (commit)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
		ListCell   *lc;

		foreach(lc, pending)
			committed = apply(committed, lfirst(lc));
		MemoryContextSwitchTo(old);
	}
	clear_pending();
	published_in_xact = false;
	QueueListenerPublish(committed != NIL ? MyDatabaseId : InvalidOid);
}

/* A subtransaction at level nest ended. */
void
ListenAtSubEnd(int nest, bool commit)
{
	ListCell   *lc;

	foreach(lc, pending)
	{
		ListenOp   *op = lfirst(lc);

		if (op->nest < nest)
			continue;
		if (commit)
			op->nest = nest - 1;
		else
		{
			if (op->channel)
				pfree(op->channel);
			pfree(op);
			pending = foreach_delete_current(pending, lc);
		}
	}
}

static void
remember(bool listen, const char *channel)
{
	ListenOp   *op;
	MemoryContext old;

	if (!exit_registered)
	{
		before_shmem_exit(unpublish_at_exit, 0);
		exit_registered = true;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	op = palloc(sizeof(ListenOp));
	op->listen = listen;
	op->channel = channel ? pstrdup(channel) : NULL;
	op->nest = GetCurrentTransactionNestLevel();
	pending = lappend(pending, op);
	MemoryContextSwitchTo(old);
}

/* From the ProcessUtility hook (module/utility.c), before the statement runs. */
/* An error unless the user may listen on channel (a queue's, or not). */
static void
check_may_listen(const char *channel)
{
	const char *name = channel + strlen(CHANNEL_PREFIX);
	QueueInfo  *q;

	if (!QueueExtensionPresent() || !QueueNameValid(name) || superuser())
		return;
	QueueSpiBegin();
	q = QueueLookupByNameIfExists(cstring_to_text(name));
	/* (one that listened before the queue was made would hear it after) */
	if (q == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to listen on channel \"%s\"", channel),
				 errdetail("There is no queue \"%s\": only superusers may listen on the channel of a queue not made yet.",
						   name),
				 errhint("LISTEN once the queue exists.")));
	if (!q->legacy_acl && !QueueMay(q, GetUserId(), QUEUE_CONSUME | QUEUE_READ))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to listen on channel \"%s\"", channel),
				 errdetail("Role \"%s\" has neither the consume nor the read privilege on queue \"%s\".",
						   GetUserNameFromId(GetUserId(), false), name),
				 errhint("The queue's owner can give one with queue.grant('%s', '%s', 'consume').",
						 name, GetUserNameFromId(GetUserId(), false))));
	QueueSpiEnd();
}

void
QueueListenUtility(Node *parsetree)
{
	if (IsA(parsetree, ListenStmt))
	{
		const char *channel = ((ListenStmt *) parsetree)->conditionname;

		if (strncmp(channel, CHANNEL_PREFIX, strlen(CHANNEL_PREFIX)) != 0)
			return;
		check_may_listen(channel);
		remember(true, channel);
		QueueListenerPublish(MyDatabaseId);
		published_in_xact = true;
	}
	else if (IsA(parsetree, UnlistenStmt))
	{
		const char *channel = ((UnlistenStmt *) parsetree)->conditionname;

		if (channel == NULL || strncmp(channel, CHANNEL_PREFIX, strlen(CHANNEL_PREFIX)) == 0)
			remember(false, channel);
	}
	else if (IsA(parsetree, DiscardStmt) &&
			 ((DiscardStmt *) parsetree)->target == DISCARD_ALL)
		remember(false, NULL);
}
