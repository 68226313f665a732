/*-------------------------------------------------------------------------
 *
 * listen.c
 *	  Which backends LISTEN on queue channels.
 *
 * The worker's NOTIFY is wasted work when nobody listens: with single-job
 * producers and no listeners it cost almost as much CPU as the producers
 * themselves.  Each backend therefore publishes, in one shared slot per
 * PGPROC, the database it listens in on some "queue_..." channel, and a
 * committing producer asks the worker for a NOTIFY only if such a backend
 * exists in its database.
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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/memutils.h"

#include "queue.h"

#define CHANNEL_PREFIX	"queue_"

/* One per PGPROC below MaxBackends: the database it listens in, or 0. */
static pg_atomic_uint32 *listen_db = NULL;

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
static bool callbacks_registered = false;

Size
QueueListenShmemSize(void)
{
	return mul_size(MaxBackends, sizeof(pg_atomic_uint32));
}

void
QueueListenShmemInit(void)
{
	bool		found;

	listen_db = ShmemInitStruct("queue listeners", QueueListenShmemSize(), &found);
	if (!found)
		for (int i = 0; i < MaxBackends; i++)
			pg_atomic_init_u32(&listen_db[i], InvalidOid);
}

static void
publish(Oid dboid)
{
	if (listen_db == NULL || MyProc == NULL || MyProc->pgprocno >= MaxBackends)
		return;
	pg_atomic_write_u32(&listen_db[MyProc->pgprocno], dboid);
	pg_memory_barrier();
}

static void
unpublish_at_exit(int code, Datum arg)
{
	publish(InvalidOid);
}

/* Does any backend of this database listen on a queue channel? */
bool
QueueAnyListener(Oid dboid)
{
	if (listen_db == NULL)
		return true;			/* cannot tell: assume so */
	pg_memory_barrier();
	for (int i = 0; i < MaxBackends; i++)
		if (pg_atomic_read_u32(&listen_db[i]) == dboid)
			return true;
	return false;
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

static void
listen_xact_callback(XactEvent event, void *arg)
{
	/* (a LISTEN in a rolled-back savepoint left published_in_xact only) */
	if (pending == NIL && !published_in_xact)
		return;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			{
				MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
				ListCell   *lc;

				foreach(lc, pending)
					committed = apply(committed, lfirst(lc));
				MemoryContextSwitchTo(old);
			}
			/* FALLTHROUGH */
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			clear_pending();
			published_in_xact = false;
			publish(committed != NIL ? MyDatabaseId : InvalidOid);
			break;
		default:
			break;
	}
}

static void
listen_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	int			nest = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	foreach(lc, pending)
	{
		ListenOp   *op = lfirst(lc);

		if (op->nest < nest)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			op->nest = nest - 1;
		else if (event == SUBXACT_EVENT_ABORT_SUB)
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

	if (!callbacks_registered)
	{
		RegisterXactCallback(listen_xact_callback, NULL);
		RegisterSubXactCallback(listen_subxact_callback, NULL);
		before_shmem_exit(unpublish_at_exit, 0);
		callbacks_registered = true;
	}
	old = MemoryContextSwitchTo(TopMemoryContext);
	op = palloc(sizeof(ListenOp));
	op->listen = listen;
	op->channel = channel ? pstrdup(channel) : NULL;
	op->nest = GetCurrentTransactionNestLevel();
	pending = lappend(pending, op);
	MemoryContextSwitchTo(old);
}

/* From the ProcessUtility hook, before the statement runs. */
void
QueueListenUtility(Node *parsetree)
{
	if (IsA(parsetree, ListenStmt))
	{
		const char *channel = ((ListenStmt *) parsetree)->conditionname;

		if (strncmp(channel, CHANNEL_PREFIX, strlen(CHANNEL_PREFIX)) != 0)
			return;
		remember(true, channel);
		publish(MyDatabaseId);
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
