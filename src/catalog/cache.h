/*-------------------------------------------------------------------------
 *
 * cache.h
 *	  Each backend's cache of queue definitions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_CATALOG_CACHE_H
#define QUEUE_CATALOG_CACHE_H

#include "datatype/timestamp.h"
#include "executor/spi.h"

#include "catalog/planids.h"

struct QueueDirectState;

/* A role given privileges on a queue (queue.queue_grants) */
typedef struct QueueGrant
{
	Oid			role;
	int			privs;			/* QUEUE_PRODUCE ... of catalog/acl.h */
} QueueGrant;

/* A queue's row of queue.queue_config, and what this backend keeps for it. */
typedef struct QueueInfo
{
	int32		qno;			/* hash key */
	char		name[NAMEDATALEN];
	Oid			seqid;			/* queue."q_<name>$seq", when looked up */
	int32		max_attempts;
	Interval	lease;
	Interval	backoff_base;
	Interval	backoff_max;
	int32		max_running;	/* 0: unlimited */
	int32		rate_limit;		/* claims per rate_period; 0: unlimited */
	int64		rate_period_us;
	int32		group_max_running;	/* jobs of one group active at once */
	bool		group_requeue;	/* a retried job goes behind its group */
	bool		keep_archive;	/* retention > 0 */
	int16		archive_seg;	/* the archive segment finished jobs go to */
	bool		paused;
	bool		legacy_acl;		/* no queue.queue_grants (before 0.4) */
	Oid			owner;			/* of its tables, as of owner_gen (catalog/acl.c) */
	bool		owner_super;	/* whether the owner was a superuser then */
	uint64		owner_gen;
	int			ngrants;
	QueueGrant *grants;			/* in TopMemoryContext */
	SPIPlanPtr	plans[NUM_QUEUE_PLANS]; /* catalog/plans.c, made on first use */
	struct QueueDirectState *direct;	/* storage/direct.c, made on first use */
	struct QueueDirectState *archive_direct;	/* the same for the archive */
} QueueInfo;

typedef void (*QueueReleaseHook) (QueueInfo *q);

extern void QueueCacheInit(QueueReleaseHook release);
extern void QueueCacheAtEOXact(void);
extern bool QueueCacheStale(void);
extern void QueueCacheForget(void);
extern uint64 QueueRelcacheGen(void);
extern bool QueueExtensionPresent(void);
extern Oid	QueueConfigRelid(void);
extern bool QueueNameValid(const char *name);

extern QueueInfo *QueueLookupByNameIfExists(text *name);
extern QueueInfo *QueueLookupByName(text *name);
extern QueueInfo *QueueLookupById(int64 id, bool missing_ok);
extern QueueInfo *QueueLookupByQno(int32 qno, bool missing_ok);

extern Oid	QueueTableRelid(QueueInfo *q);
extern Oid	QueueLeaseTableRelid(QueueInfo *q);
extern Oid	QueueSeqRelid(QueueInfo *q);
extern int64 QueueNextSeq(QueueInfo *q);

#endif							/* QUEUE_CATALOG_CACHE_H */
