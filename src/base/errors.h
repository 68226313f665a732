/*-------------------------------------------------------------------------
 *
 * errors.h
 *	  The errors several files raise, worded once.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_BASE_ERRORS_H
#define QUEUE_BASE_ERRORS_H

#include "executor/spi.h"

extern void QueueCheckSpi(int ret, int expected, int64 want_rows, const char *what,
						  const char *qname);
extern void QueueCheckKey(const char *what, text *key);
extern void QueueCheckNotNull(bool isnull, const char *what, const char *hint);
extern pg_attribute_noreturn() void QueueErrorNoQueueNumber(int32 qno);
extern pg_attribute_noreturn() void QueueErrorNoJob(int64 id, const char *detail,
													   const char *hint);

#endif							/* QUEUE_BASE_ERRORS_H */
