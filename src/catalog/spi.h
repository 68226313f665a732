/*-------------------------------------------------------------------------
 *
 * spi.h
 *	  The scope every statement of ours runs in.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_CATALOG_SPI_H
#define QUEUE_CATALOG_SPI_H

#include "executor/spi.h"

extern void QueueSpiInit(void);
extern void QueueSpiBegin(void);
extern void QueueSpiEnd(void);
extern Oid	QueueSpiCaller(void);
extern void QueueSpiRunAs(Oid role, bool role_is_superuser);
extern void QueueSpiAtSubAbort(int nest);
extern void QueueSpiAtEOXact(void);
extern int	QueueExecuteLatest(SPIPlanPtr plan, Datum *args, bool read_only, long count);
extern int	QueueExecuteSqlLatest(const char *sql, Datum *arg, bool read_only, long count);

#endif							/* QUEUE_CATALOG_SPI_H */
