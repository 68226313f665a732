/*-------------------------------------------------------------------------
 *
 * schedules.h
 *	  The worker's firing of schedules' ticks.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_WORKER_SCHEDULES_H
#define QUEUE_WORKER_SCHEDULES_H

#include "datatype/timestamp.h"

extern bool WorkerFireSchedules(TimestampTz *next);

#endif							/* QUEUE_WORKER_SCHEDULES_H */
