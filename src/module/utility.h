/*-------------------------------------------------------------------------
 *
 * utility.h
 *	  The ProcessUtility hook.
 *
 *-------------------------------------------------------------------------
 */
#ifndef QUEUE_MODULE_UTILITY_H
#define QUEUE_MODULE_UTILITY_H

extern void QueueUtilityHookInstall(void);

#endif							/* QUEUE_MODULE_UTILITY_H */
