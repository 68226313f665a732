/*-------------------------------------------------------------------------
 *
 * upkeep.h
 *	  A database worker's upkeep passes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_WORKER_UPKEEP_H
#define QUEUE_WORKER_UPKEEP_H

#include "datatype/timestamp.h"

extern bool WorkerUpkeep(bool orphans, bool cleanup, TimestampTz *next);

#endif							/* QUEUE_WORKER_UPKEEP_H */
